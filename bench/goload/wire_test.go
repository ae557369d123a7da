package main

// Run: cd bench/goload && GO111MODULE=off GOPATH=$(mktemp -d):/usr/share/gocode go test .

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/gorilla/websocket"
)

func TestDeltaAudioIsFoundWithAndWithoutTheFastPath(t *testing.T) {
	audio := []byte("some pcm bytes, any length")
	encoded := base64.StdEncoding.EncodeToString(audio)
	messages := []string{
		`{"type":"response.output_audio.delta","event_id":"e1","delta":"` + encoded + `"}`,
		`{"type": "response.output_audio.delta", "delta": "` + encoded + `"}`,
		// nested object: encoding/json decides
		`{"type":"response.output_audio.delta","x":{"type":"other"},"delta":"` + encoded + `"}`,
		// an escaped slash: encoding/json decides
		`{"delta":"` + encoded + `","note":"a\/b","type":"response.output_audio.delta"}`,
	}
	for _, message := range messages {
		got, isError := openaiWire{}.decode(websocket.TextMessage, []byte(message), nil)
		if !bytes.Equal(got, audio) || isError {
			t.Errorf("decode(%s) = %q, %v", message, got, isError)
		}
	}
}

func TestOtherEventsCarryNoAudio(t *testing.T) {
	for message, wantError := range map[string]bool{
		`{"type":"response.output_audio.done","note":"response.output_audio.delta"}`: false,
		`{"type":"session.created","session":{}}`:                                    false,
		`{"type":"error","error":{"message":"bad"}}`:                                 true,
	} {
		got, isError := openaiWire{}.decode(websocket.TextMessage, []byte(message), nil)
		if got != nil || isError != wantError {
			t.Errorf("decode(%s) = %q, %v", message, got, isError)
		}
	}
}

func TestTheDeflateAnswerGetsClientNoContextTakeover(t *testing.T) {
	head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover\r\n\r\n"
	want := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover" +
		"; client_no_context_takeover\r\n\r\n"
	if got := string(patchAnswer([]byte(head))); got != want {
		t.Errorf("patchAnswer = %q", got)
	}
	if got := string(patchAnswer([]byte(want))); got != want {
		t.Errorf("patchAnswer changed a complete answer: %q", got)
	}
}

func TestFramesCarryTheirStampAndABodyOnlyTheyHave(t *testing.T) {
	f := newFramer(960)
	frame := make([]byte, 960)
	f.fill(frame, 7, 123456789012)
	if session, sequence := readStamp(frame); session != 7 || sequence != 123456789012 {
		t.Fatalf("stamp = %d, %d", session, sequence)
	}
	if !bytes.Equal(frame[stampBytes:], f.body(7, 123456789012)) {
		t.Fatal("body differs")
	}
	if bytes.Equal(f.body(7, 1), f.body(7, 2)) || bytes.Equal(f.body(1, 1), f.body(2, 1)) {
		t.Fatal("neighbouring frames have the same body")
	}
}

func TestQuantilesInterpolateLikeNumpy(t *testing.T) {
	sorted := []float64{1, 2, 3, 4}
	if got := quantileOf(sorted, 0.5); got != 2.5 {
		t.Errorf("p50 = %v", got)
	}
	if got := quantileOf(sorted, 1); got != 4 {
		t.Errorf("max = %v", got)
	}
	if points := cdf(make([]float64, 10000)); len(points) > cdfPoints || points[len(points)-1][1] != 1 {
		t.Errorf("cdf has %d points, last %v", len(points), points[len(points)-1])
	}
}

func TestASessionUpdateGoesWithTheOpenAIProtocolOnly(t *testing.T) {
	update := `{"type":"session.update","session":{"type":"realtime"}}`
	base := []string{"pingpong", "-url", "ws://h/v1/realtime?model=m", "-n", "1"}
	cfg, err := parseConfig(append(base, "-proto", "openai", "-session-update", update))
	if err != nil || cfg.sessionUpdate != update {
		t.Fatalf("openai with a session.update: %v, %+v", err, cfg)
	}
	if w, ok := newWire(cfg).(openaiWire); !ok || string(w.sessionUpdate) != update {
		t.Errorf("the openai wire does not carry the session.update: %#v", newWire(cfg))
	}
	for _, args := range [][]string{
		append(base, "-proto", "gateway", "-session-update", update),
		append(base, "-proto", "openai", "-session-update", `{"type":`),
	} {
		if _, err := parseConfig(args); err == nil {
			t.Errorf("parseConfig(%v) accepted it", args)
		}
	}
}
