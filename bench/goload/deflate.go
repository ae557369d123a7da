package main

import (
	"bytes"
	"context"
	"net"
)

// gorilla/websocket only accepts a permessage-deflate answer that names both
// server_no_context_takeover and client_no_context_takeover. aiohttp (the gateway, the OpenAI
// fake) leaves out client_no_context_takeover, which RFC 7692 allows: the client may drop its
// context anyway, and gorilla always does. So with -deflate on ws:// we add the parameter to the
// server's answer before gorilla reads it; nothing else in the stream changes.

// deflateDialer dials TCP and wraps the connection in an answerPatcher.
func deflateDialer(ctx context.Context, network, address string) (net.Conn, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &answerPatcher{Conn: conn}, nil
}

// answerPatcher rewrites the HTTP upgrade answer (everything up to the blank line), then
// passes bytes through untouched.
type answerPatcher struct {
	net.Conn
	head    []byte // the answer read so far
	pending []byte // rewritten bytes not yet handed to the reader
	done    bool
}

var headEnd = []byte("\r\n\r\n")

func (p *answerPatcher) Read(into []byte) (int, error) {
	for !p.done {
		chunk := make([]byte, 4096)
		n, err := p.Conn.Read(chunk)
		p.head = append(p.head, chunk[:n]...)
		if end := bytes.Index(p.head, headEnd); end >= 0 {
			p.pending = append(patchAnswer(p.head[:end+len(headEnd)]), p.head[end+len(headEnd):]...)
			p.head, p.done = nil, true
		} else if err != nil {
			p.pending, p.head, p.done = p.head, nil, true // let gorilla report the broken answer
		}
		if err != nil && len(p.pending) == 0 {
			return 0, err
		}
	}
	if len(p.pending) > 0 {
		n := copy(into, p.pending)
		p.pending = p.pending[n:]
		return n, nil
	}
	return p.Conn.Read(into)
}

// patchAnswer adds client_no_context_takeover to a permessage-deflate extension line.
func patchAnswer(head []byte) []byte {
	lines := bytes.Split(head, []byte("\r\n"))
	for i, line := range lines {
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found || !bytes.EqualFold(bytes.TrimSpace(name), []byte("Sec-WebSocket-Extensions")) {
			continue
		}
		if bytes.Contains(value, []byte("permessage-deflate")) &&
			!bytes.Contains(value, []byte("client_no_context_takeover")) {
			lines[i] = append(append([]byte(nil), line...), "; client_no_context_takeover"...)
		}
	}
	return bytes.Join(lines, []byte("\r\n"))
}
