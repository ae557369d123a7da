package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// wire is one client protocol: how a session opens, how a frame goes out, what comes back.
type wire interface {
	// handshake runs after the WebSocket opens and returns once audio may flow.
	handshake(conn *websocket.Conn, deadline time.Time) error
	// encode turns a PCM frame into a message, reusing dst's storage.
	encode(dst []byte, frame []byte) (messageType int, message []byte)
	// decode returns the audio a message carries (nil when none; may alias scratch) and whether
	// it was an error event (gateway: error or session.ended; openai: error).
	decode(messageType int, message []byte, scratch []byte) (audio []byte, isError bool)
}

func newWire(cfg *config) wire {
	switch cfg.proto {
	case "openai":
		return openaiWire{sessionUpdate: []byte(cfg.sessionUpdate)}
	case "gateway":
		return gatewayWire{start: []byte(cfg.start)}
	default:
		return pcmWire{}
	}
}

// openaiWire: OpenAI Realtime GA client events, audio back in response.output_audio.delta.
// With sessionUpdate, the session is configured first (a session.update once session.created
// has come, then session.updated awaited), as a GA client does before it sends audio.
type openaiWire struct{ sessionUpdate []byte }

var (
	appendPrefix = []byte(`{"type":"input_audio_buffer.append","audio":"`)
	appendSuffix = []byte(`"}`)
	deltaType    = []byte(`response.output_audio.delta`)
	errorMarker  = []byte(`"error"`)
)

func (w openaiWire) handshake(conn *websocket.Conn, deadline time.Time) error {
	err := awaitEvent(conn, deadline, "session.created")
	if err != nil || len(w.sessionUpdate) == 0 {
		return err
	}
	if err := conn.WriteMessage(websocket.TextMessage, w.sessionUpdate); err != nil {
		return err
	}
	return awaitEvent(conn, deadline, "session.updated")
}

func (openaiWire) encode(dst []byte, frame []byte) (int, []byte) {
	size := len(appendPrefix) + base64.StdEncoding.EncodedLen(len(frame)) + len(appendSuffix)
	if cap(dst) < size {
		dst = make([]byte, size)
	}
	dst = dst[:size]
	n := copy(dst, appendPrefix)
	base64.StdEncoding.Encode(dst[n:], frame)
	copy(dst[size-len(appendSuffix):], appendSuffix)
	return websocket.TextMessage, dst
}

func (openaiWire) decode(messageType int, message []byte, scratch []byte) ([]byte, bool) {
	if messageType != websocket.TextMessage {
		return nil, false
	}
	if !bytes.Contains(message, deltaType) { // every other event is ignored, errors counted
		return nil, bytes.Contains(message, errorMarker) && eventType(message) == "error"
	}
	if encoded, ok := flatStringField(message, "delta"); ok {
		if kind, ok := flatStringField(message, "type"); ok {
			if string(kind) != string(deltaType) {
				return nil, false
			}
			return decodeBase64(encoded, scratch)
		}
	}
	var event struct {
		Type  string `json:"type"`
		Delta []byte `json:"delta"` // encoding/json decodes base64 into []byte
	}
	if json.Unmarshal(message, &event) != nil || event.Type != string(deltaType) {
		return nil, false
	}
	return event.Delta, false
}

func decodeBase64(encoded []byte, scratch []byte) ([]byte, bool) {
	size := base64.StdEncoding.DecodedLen(len(encoded))
	if cap(scratch) < size {
		scratch = make([]byte, size)
	}
	n, err := base64.StdEncoding.Decode(scratch[:size], encoded)
	if err != nil {
		return nil, false
	}
	return scratch[:n], false
}

// flatStringField finds "key": "value" in a JSON object that has no nested object or array
// (an audio delta) and whose value has no escapes; ok is false whenever that is not certain,
// and the caller falls back to encoding/json. It saves a full parse per audio frame.
func flatStringField(message []byte, key string) ([]byte, bool) {
	if bytes.IndexByte(message[1:], '{') >= 0 || bytes.IndexByte(message, '[') >= 0 {
		return nil, false
	}
	quoted := `"` + key + `"`
	at := bytes.Index(message, []byte(quoted))
	if at < 0 || bytes.Contains(message[at+len(quoted):], []byte(quoted)) {
		return nil, false
	}
	rest := bytes.TrimLeft(message[at+len(quoted):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return nil, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return nil, false
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 || bytes.IndexByte(rest[1:1+end], '\\') >= 0 {
		return nil, false
	}
	return rest[1 : 1+end], true
}

func eventType(message []byte) string {
	var event struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(message, &event) != nil {
		return ""
	}
	return event.Type
}

// gatewayWire: our client protocol, session.start then binary PCM both ways.
type gatewayWire struct{ start []byte }

func (w gatewayWire) handshake(conn *websocket.Conn, deadline time.Time) error {
	if err := conn.WriteMessage(websocket.TextMessage, w.start); err != nil {
		return err
	}
	return awaitEvent(conn, deadline, "session.started")
}

func (gatewayWire) encode(_ []byte, frame []byte) (int, []byte) {
	return websocket.BinaryMessage, frame
}

func (gatewayWire) decode(messageType int, message []byte, _ []byte) ([]byte, bool) {
	if messageType == websocket.BinaryMessage {
		return message, false
	}
	kind := eventType(message)
	return nil, kind == "error" || kind == "session.ended"
}

// end sends session.end and waits until deadline for session.ended (a read that already
// failed fails again at once, so a dead session costs nothing).
func (gatewayWire) end(conn *websocket.Conn, deadline time.Time) {
	if conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"session.end"}`)) != nil {
		return
	}
	_ = conn.SetReadDeadline(deadline)
	var buffer []byte
	for {
		messageType, message, err := readMessage(conn, buffer)
		if err != nil {
			return
		}
		buffer = message
		if messageType == websocket.TextMessage && eventType(message) == "session.ended" {
			return
		}
	}
}

// pcmWire: raw binary PCM both ways, nothing else.
type pcmWire struct{}

func (pcmWire) handshake(*websocket.Conn, time.Time) error { return nil }

func (pcmWire) encode(_ []byte, frame []byte) (int, []byte) {
	return websocket.BinaryMessage, frame
}

func (pcmWire) decode(messageType int, message []byte, _ []byte) ([]byte, bool) {
	if messageType == websocket.BinaryMessage {
		return message, false
	}
	return nil, false
}

// awaitEvent reads until a text event of type want; error and session.ended fail the session.
func awaitEvent(conn *websocket.Conn, deadline time.Time, want string) error {
	if err := conn.SetReadDeadline(deadline); err != nil {
		return err
	}
	var buffer []byte
	for {
		messageType, message, err := readMessage(conn, buffer)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", want, err)
		}
		buffer = message
		if messageType != websocket.TextMessage {
			continue
		}
		switch eventType(message) {
		case want:
			return conn.SetReadDeadline(time.Time{})
		case "error", "session.ended":
			return fmt.Errorf("instead of %s: %s", want, clip(string(message), 300))
		}
	}
}

// readMessage reads the next message into buffer's storage (no allocation per message).
func readMessage(conn *websocket.Conn, buffer []byte) (int, []byte, error) {
	messageType, reader, err := conn.NextReader()
	if err != nil {
		return 0, buffer, err
	}
	buffer = buffer[:0]
	for {
		if len(buffer) == cap(buffer) {
			buffer = append(buffer, 0)[:len(buffer)]
		}
		n, err := reader.Read(buffer[len(buffer):cap(buffer)])
		buffer = buffer[:len(buffer)+n]
		if errors.Is(err, io.EOF) {
			return messageType, buffer, nil
		}
		if err != nil {
			return 0, buffer, err
		}
	}
}

// dial opens one session: WebSocket upgrade, then the protocol's handshake.
func dial(ctx context.Context, cfg *config, w wire) (*websocket.Conn, error) {
	deadline := time.Now().Add(30 * time.Second)
	if limit, ok := ctx.Deadline(); ok && limit.Before(deadline) {
		deadline = limit
	}
	dialer := websocket.Dialer{
		HandshakeTimeout:  time.Until(deadline),
		ReadBufferSize:    16 << 10,
		WriteBufferSize:   16 << 10,
		EnableCompression: cfg.deflate,
	}
	if cfg.deflate && strings.HasPrefix(cfg.url, "ws://") {
		dialer.NetDialContext = deflateDialer
	}
	conn, response, err := dialer.DialContext(ctx, cfg.url, cfg.headers)
	if err != nil {
		if response != nil {
			body, _ := io.ReadAll(io.LimitReader(response.Body, 300))
			return nil, fmt.Errorf("%w (HTTP %d %s)", err, response.StatusCode,
				strings.TrimSpace(string(body)))
		}
		return nil, err
	}
	if strings.Contains(response.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate") {
		deflateNegotiated.Store(true)
	}
	if err := w.handshake(conn, deadline); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func clip(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	return text[:limit] + "…"
}
