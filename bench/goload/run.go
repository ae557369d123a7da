package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

var deflateNegotiated atomic.Bool // the server accepted permessage-deflate on some connection

// run is one invocation: its sessions, the measured window and what went wrong.
type run struct {
	cfg    *config
	ctx    context.Context
	wire   wire
	framer *framer
	clock  time.Time // origin of now(); monotonic

	sessions      []*session // the connected ones
	setupsMs      []float64
	connectFailed int

	mu          sync.Mutex
	errorSample string

	windowOnce     sync.Once
	windowStarted  atomic.Bool
	windowEndOnce  sync.Once
	windowBegin    time.Time
	windowFinish   time.Time
	cpuBegin       float64
	cpuFinish      float64
	sendersLeft    atomic.Int64
	receivers      sync.WaitGroup
	sendersRunning sync.WaitGroup
}

func newRun(cfg *config) *run {
	return &run{cfg: cfg, wire: newWire(cfg), framer: newFramer(cfg.frameBytes),
		clock: time.Now()}
}

// now is nanoseconds since the run began, never 0 (0 marks "not sent" in session.sentAt).
func (r *run) now() int64 { return int64(time.Since(r.clock)) + 1 }

func (r *run) connected() int { return len(r.sessions) }

func (r *run) noteError(text string) {
	r.mu.Lock()
	if r.errorSample == "" {
		r.errorSample = clip(text, 300)
	}
	r.mu.Unlock()
}

// windowStart marks the first measured frame about to go (printed once, flushed: stderr is
// unbuffered). The harness snapshots the relay's CPU time at this line.
func (r *run) windowStart() {
	r.windowOnce.Do(func() {
		r.cpuBegin = selfCPUSeconds()
		r.windowBegin = time.Now()
		fmt.Fprintln(os.Stderr, "WINDOW START")
		r.windowStarted.Store(true)
	})
}

// windowEnd marks the last measured frame sent (pingpong: the last round trip back); printed
// at most once and only after WINDOW START. Every sender that reached its measured frames has
// called windowStart before the last sender calls this.
func (r *run) windowEnd() {
	if !r.windowStarted.Load() {
		return
	}
	r.windowEndOnce.Do(func() {
		r.windowFinish = time.Now()
		r.cpuFinish = selfCPUSeconds()
		fmt.Fprintln(os.Stderr, "WINDOW END")
	})
}

func (r *run) senderDone() {
	if r.sendersLeft.Add(-1) == 0 {
		r.windowEnd()
	}
	r.sendersRunning.Done()
}

func (r *run) receiverDone() { r.receivers.Done() }

// connect opens cfg.sessions sessions, at most connect-concurrency at a time, keeping their
// indices; each one's setup time runs from the TCP dial to the end of the protocol handshake.
func (r *run) connect() {
	slots := make(chan struct{}, r.cfg.connectConcurrency)
	opened := make([]*session, r.cfg.sessions)
	setups := make([]float64, r.cfg.sessions)
	var wg sync.WaitGroup
	for k := 0; k < r.cfg.sessions; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
			case <-r.ctx.Done():
				r.noteError("connect: " + r.ctx.Err().Error())
				return
			}
			defer func() { <-slots }()
			began := time.Now()
			conn, err := dial(r.ctx, r.cfg, r.wire)
			if err != nil {
				r.noteError("connect: " + err.Error())
				return
			}
			setups[k] = float64(time.Since(began)) / 1e6
			opened[k] = newSession(r, k, conn)
		}(k)
	}
	wg.Wait()
	for k, s := range opened {
		if s == nil {
			r.connectFailed++
			continue
		}
		r.sessions = append(r.sessions, s)
		r.setupsMs = append(r.setupsMs, setups[k])
	}
	go r.closeOnTimeout()
}

// closeOnTimeout enforces -timeout: closing the sockets ends every blocked read and write.
func (r *run) closeOnTimeout() {
	<-r.ctx.Done()
	for _, s := range r.sessions {
		s.conn.Close()
	}
}

// load: every session sends on its own absolute schedule, starts spread over one period.
func (r *run) load(ctx context.Context) {
	r.ctx = ctx
	r.connect()
	if len(r.sessions) == 0 {
		return
	}
	period := time.Duration(float64(time.Second) / r.cfg.rate)
	origin := time.Now().Add(20 * time.Millisecond)
	r.sendersLeft.Store(int64(len(r.sessions)))
	for _, s := range r.sessions {
		offset := time.Duration(int64(period) * int64(s.index) / int64(r.cfg.sessions))
		r.receivers.Add(1)
		r.sendersRunning.Add(1)
		go s.receive()
		go s.sendOnSchedule(origin.Add(offset), period)
	}
	r.sendersRunning.Wait()
	r.receivers.Wait()
	r.closeAll()
}

// pingpong: one session, one frame in flight; a frame not back within -grace is lost.
func (r *run) pingpong(ctx context.Context) {
	r.ctx = ctx
	r.connect()
	if len(r.sessions) == 0 {
		return
	}
	s := r.sessions[0]
	s.arrivals = make(chan int, 4)
	r.receivers.Add(1)
	received := make(chan struct{})
	go func() { s.receive(); close(received) }()
	frame := make([]byte, r.cfg.frameBytes)
	var message []byte
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for k := 0; k < s.total; k++ {
		if k == r.cfg.warmup {
			r.windowStart()
		}
		var ok bool
		if message, ok = s.send(k, frame, message); !ok {
			s.unsent += s.measuredFrom(k)
			break
		}
		if !r.awaitFrame(s, k, timer, received) {
			if r.cfg.match == "bytes" || ctx.Err() != nil || isClosed(received) {
				s.unsent += s.measuredFrom(k + 1) // counting bytes cannot resync after a loss
				break
			}
		}
	}
	r.windowEnd()
	_ = s.conn.SetReadDeadline(time.Now()) // stop the receiver if frames are still missing
	r.receivers.Wait()
	r.closeAll()
}

// awaitFrame waits up to -grace for frame k to come back.
func (r *run) awaitFrame(s *session, k int, timer *time.Timer, received chan struct{}) bool {
	if !timer.Stop() {
		select {
		case <-timer.C:
		default:
		}
	}
	timer.Reset(r.cfg.grace)
	for {
		select {
		case back := <-s.arrivals:
			if back == k {
				return true
			}
		case <-timer.C:
			return false
		case <-received:
			return false
		case <-r.ctx.Done():
			return false
		}
	}
}

func isClosed(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// closeAll ends every session: gateway sessions with session.end, waiting (briefly) for
// session.ended so the gateway frees them before the next run, then a normal close frame.
func (r *run) closeAll() {
	var wg sync.WaitGroup
	for _, s := range r.sessions {
		wg.Add(1)
		go func(s *session) {
			defer wg.Done()
			if r.cfg.proto == "gateway" && r.ctx.Err() == nil {
				r.wire.(gatewayWire).end(s.conn, time.Now().Add(2*time.Second))
			}
			closing := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
			_ = s.conn.WriteControl(websocket.CloseMessage, closing, time.Now().Add(time.Second))
			s.conn.Close()
		}(s)
	}
	wg.Wait()
}

func selfCPUSeconds() float64 {
	var usage syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &usage) != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
}
