package main

import (
	"bytes"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// session is one connection: a sender goroutine writes frames, a receiver goroutine matches
// what comes back. Fields are owned by one of the two unless atomic; the run reads them all
// once both have finished.
type session struct {
	index  uint32
	conn   *websocket.Conn
	run    *run
	total  int     // frames this session sends, warm-up included
	sentAt []int64 // atomic: ns on the run's clock when frame k went out, 0 = not yet

	// sender
	sent   int       // measured frames sent
	unsent int       // measured frames never sent because the connection failed
	lagsMs []float64 // how late each measured frame went out after its due time

	// receiver
	back        []bool // stamp matching: frame k is back
	backCount   int    // frames back, warm-up included
	received    int    // measured frames back
	roundTrips  []float64
	firstSecond []float64 // load: round trips of the frames sent in the session's first second
	mismatched  int
	stray       int // unknown stamps, other sessions' frames, duplicates, excess audio
	errors      int
	pending     []byte // stamp matching: a partial frame, when a relay splits frames
	bytesBack   int64  // bytes matching: audio bytes received
	readError   string
	arrivals    chan int // pingpong: frame numbers as they come back
}

func newSession(r *run, index int, conn *websocket.Conn) *session {
	total := r.cfg.framesPerSession()
	s := &session{index: uint32(index), conn: conn, run: r, total: total,
		sentAt: make([]int64, total)}
	if r.cfg.match == "stamp" {
		s.back = make([]bool, total)
	}
	return s
}

// send writes frame k now and records when; false when the connection failed.
func (s *session) send(k int, frame []byte, message []byte) ([]byte, bool) {
	s.run.framer.fill(frame, s.index, uint64(k))
	messageType, encoded := s.run.wire.encode(message, frame)
	atomic.StoreInt64(&s.sentAt[k], s.run.now())
	if err := s.conn.WriteMessage(messageType, encoded); err != nil {
		return encoded, false
	}
	if k >= s.run.cfg.warmup {
		s.sent++
	}
	return encoded, true
}

// sendOnSchedule sends every frame at due + k × period on an absolute clock: a late send does
// not push the later ones back. The sender ends the receiver's wait grace after its last frame.
func (s *session) sendOnSchedule(due time.Time, period time.Duration) {
	defer s.run.senderDone()
	defer func() { _ = s.conn.SetReadDeadline(time.Now().Add(s.run.cfg.grace)) }()
	frame := make([]byte, s.run.cfg.frameBytes)
	var message []byte
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for k := 0; k < s.total; k++ {
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-s.run.ctx.Done():
				s.unsent += s.measuredFrom(k)
				return
			}
		}
		if k == s.run.cfg.warmup {
			s.run.windowStart()
		}
		lag := time.Since(due)
		var ok bool
		if message, ok = s.send(k, frame, message); !ok {
			s.unsent += s.measuredFrom(k)
			return
		}
		if k >= s.run.cfg.warmup {
			s.lagsMs = append(s.lagsMs, float64(lag)/1e6)
		}
		due = due.Add(period)
	}
}

// measuredFrom is how many measured frames remain from frame k on.
func (s *session) measuredFrom(k int) int {
	if k < s.run.cfg.warmup {
		k = s.run.cfg.warmup
	}
	return s.total - k
}

// receive reads until every frame is back, the read deadline passes or the connection fails.
func (s *session) receive() {
	defer s.run.receiverDone()
	var buffer, scratch []byte
	for !s.allBack() {
		messageType, message, err := readMessage(s.conn, buffer)
		if err != nil {
			s.readError = clip(err.Error(), 200)
			return
		}
		now := s.run.now()
		buffer = message
		audio, isError := s.run.wire.decode(messageType, message, scratch)
		if isError {
			s.errors++
			s.run.noteError(string(message))
		}
		if len(audio) == 0 {
			continue
		}
		if cap(audio) > cap(scratch) && s.run.cfg.proto == "openai" {
			scratch = audio[:0] // keep the larger decode buffer
		}
		if s.run.cfg.match == "stamp" {
			s.matchStamps(audio, now)
		} else {
			s.matchBytes(len(audio), now)
		}
	}
}

func (s *session) allBack() bool {
	if s.run.cfg.match == "stamp" {
		return s.backCount == s.total
	}
	return s.bytesBack >= int64(s.total)*int64(s.run.cfg.outFrameBytes)
}

// matchStamps cuts the audio into frames (the fast path: exactly one frame per message).
func (s *session) matchStamps(audio []byte, now int64) {
	size := s.run.cfg.frameBytes
	if len(s.pending) == 0 && len(audio) == size {
		s.checkFrame(audio, now)
		return
	}
	s.pending = append(s.pending, audio...)
	for len(s.pending) >= size {
		s.checkFrame(s.pending[:size], now)
		s.pending = s.pending[size:]
	}
	if len(s.pending) == 0 {
		s.pending = nil
	} else {
		s.pending = append([]byte(nil), s.pending...) // don't keep the consumed prefix alive
	}
}

func (s *session) checkFrame(frame []byte, now int64) {
	index, sequence := readStamp(frame)
	if index != s.index || sequence >= uint64(s.total) {
		s.stray++
		return
	}
	k := int(sequence)
	sentAt := atomic.LoadInt64(&s.sentAt[k])
	switch {
	case sentAt == 0:
		s.stray++
	case !bytes.Equal(frame[stampBytes:], s.run.framer.body(index, sequence)):
		s.mismatched++
	case s.back[k]:
		s.stray++
	default:
		s.back[k] = true
		s.frameBack(k, now-sentAt)
	}
}

// matchBytes: frame k is back once (k+1) × out-frame-bytes have arrived in total.
func (s *session) matchBytes(size int, now int64) {
	out := int64(s.run.cfg.outFrameBytes)
	s.bytesBack += int64(size)
	for s.backCount < s.total && s.bytesBack >= int64(s.backCount+1)*out {
		k := s.backCount
		sentAt := atomic.LoadInt64(&s.sentAt[k])
		if sentAt == 0 { // audio for a frame not sent yet: the relay made some up
			s.stray++
			s.backCount++
			continue
		}
		s.frameBack(k, now-sentAt)
	}
	if s.backCount == s.total && s.bytesBack > int64(s.total)*out {
		s.stray++
	}
}

func (s *session) frameBack(k int, roundTripNs int64) {
	s.backCount++
	if k >= s.run.cfg.warmup {
		s.received++
		s.roundTrips = append(s.roundTrips, float64(roundTripNs)/1e6)
	}
	if k < s.run.cfg.firstSecondFrames() { // measured or not: a session's start, on its own
		s.firstSecond = append(s.firstSecond, float64(roundTripNs)/1e6)
	}
	if s.arrivals != nil {
		select {
		case s.arrivals <- k:
		default: // pingpong waits for one frame at a time: the channel never fills
		}
	}
}
