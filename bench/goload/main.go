// Command goload is the benchmark's load generator: WebSocket sessions that send stamped PCM16
// frames on a fixed clock and time each frame's round trip through a relay (issue 9). It is
// written in Go because a Python load generator costs about as much CPU as the relay it measures.
//
//	goload pingpong -url URL -proto P -n N [common flags]
//	goload load     -url URL -proto P -c SESSIONS -rate FPS -dur SECONDS [common flags]
//
// It prints one JSON object on stdout at the end, and "WINDOW START" / "WINDOW END" lines on
// stderr around the measured window (the Python harness snapshots CPU counters at those lines).
// Built in GOPATH mode from Debian packages only: see bench/goload_runner.py.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

const defaultStart = `{"type":"session.start","mode":"voice",` +
	`"audio":{"input_rate":24000,"output_rate":24000}}`

const usage = `usage:
  goload pingpong -url URL -proto openai|gateway|pcm -n N [common flags]
  goload load     -url URL -proto openai|gateway|pcm -c SESSIONS -rate FPS -dur SECONDS [common flags]
common flags: -header 'Name: value' (repeatable) -start JSON -session-update JSON -frame-bytes 960
  -out-frame-bytes 0 -match stamp|bytes -warmup 100 -grace 2s -deflate -connect-concurrency 20
  -timeout 120s`

// config is the parsed command line.
type config struct {
	mode               string // "pingpong" or "load"
	url                string
	proto              string
	rounds             int // pingpong: measured round trips
	sessions           int
	rate               float64 // frames per second per session
	durationS          float64 // load: measured seconds per session
	headers            http.Header
	start              string
	sessionUpdate      string // openai: sent after session.created, session.updated awaited
	frameBytes         int
	outFrameBytes      int
	match              string // "stamp" or "bytes"
	warmup             int
	grace              time.Duration
	deflate            bool
	connectConcurrency int
	timeout            time.Duration
}

// headerFlags collects repeated -header 'Name: value' flags.
type headerFlags struct{ header http.Header }

func (h *headerFlags) String() string { return "" }

func (h *headerFlags) Set(value string) error {
	name, val, found := strings.Cut(value, ":")
	if !found || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want 'Name: value', got %q", value)
	}
	h.header.Add(strings.TrimSpace(name), strings.TrimSpace(val))
	return nil
}

// secondsFlag is a duration given as "2s", "500ms" or a bare number of seconds.
type secondsFlag struct{ value *time.Duration }

func (s secondsFlag) String() string {
	if s.value == nil {
		return ""
	}
	return s.value.String()
}

func (s secondsFlag) Set(text string) error {
	if seconds, err := strconv.ParseFloat(text, 64); err == nil {
		*s.value = time.Duration(seconds * float64(time.Second))
		return nil
	}
	parsed, err := time.ParseDuration(text)
	if err != nil {
		return err
	}
	*s.value = parsed
	return nil
}

func parseConfig(args []string) (*config, error) {
	if len(args) < 1 || (args[0] != "pingpong" && args[0] != "load") {
		return nil, errors.New("the first argument must be pingpong or load")
	}
	cfg := &config{mode: args[0], headers: http.Header{}, grace: 2 * time.Second,
		timeout: 120 * time.Second}
	flags := flag.NewFlagSet("goload "+cfg.mode, flag.ContinueOnError)
	flags.StringVar(&cfg.url, "url", "", "ws:// URL of the relay (or of the upstream itself)")
	flags.StringVar(&cfg.proto, "proto", "", "openai | gateway | pcm")
	flags.IntVar(&cfg.rounds, "n", 0, "pingpong: measured round trips")
	flags.IntVar(&cfg.sessions, "c", 0, "load: sessions")
	flags.Float64Var(&cfg.rate, "rate", 0, "load: frames per second per session")
	flags.Float64Var(&cfg.durationS, "dur", 0, "load: measured seconds")
	flags.Var(&headerFlags{cfg.headers}, "header", "'Name: value' on the upgrade (repeatable)")
	flags.StringVar(&cfg.start, "start", defaultStart, "gateway: the session.start event")
	flags.StringVar(&cfg.sessionUpdate, "session-update", "",
		"openai: a session.update sent after session.created (session.updated awaited)")
	flags.IntVar(&cfg.frameBytes, "frame-bytes", 960, "bytes of PCM16 per frame sent")
	flags.IntVar(&cfg.outFrameBytes, "out-frame-bytes", 0, "bytes per frame back (0 = same)")
	flags.StringVar(&cfg.match, "match", "stamp", "stamp | bytes")
	flags.IntVar(&cfg.warmup, "warmup", 100, "unmeasured round trips / frames per session")
	flags.Var(secondsFlag{&cfg.grace}, "grace", "wait for stragglers")
	flags.BoolVar(&cfg.deflate, "deflate", false, "offer permessage-deflate")
	flags.IntVar(&cfg.connectConcurrency, "connect-concurrency", 20, "parallel connects")
	flags.Var(secondsFlag{&cfg.timeout}, "timeout", "hard cap on the whole run")
	if err := flags.Parse(args[1:]); err != nil {
		return nil, err
	}
	if flags.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", flags.Args())
	}
	if cfg.outFrameBytes == 0 {
		cfg.outFrameBytes = cfg.frameBytes
	}
	return cfg, cfg.validate()
}

func (cfg *config) validate() error {
	switch {
	case !strings.HasPrefix(cfg.url, "ws://") && !strings.HasPrefix(cfg.url, "wss://"):
		return fmt.Errorf("-url must be a ws:// or wss:// URL, got %q", cfg.url)
	case cfg.proto != "openai" && cfg.proto != "gateway" && cfg.proto != "pcm":
		return fmt.Errorf("-proto must be openai, gateway or pcm, got %q", cfg.proto)
	case cfg.match != "stamp" && cfg.match != "bytes":
		return fmt.Errorf("-match must be stamp or bytes, got %q", cfg.match)
	case cfg.frameBytes < stampBytes || cfg.frameBytes%2 != 0:
		return fmt.Errorf("-frame-bytes must be even and at least %d", stampBytes)
	case cfg.outFrameBytes < 2 || cfg.outFrameBytes%2 != 0:
		return errors.New("-out-frame-bytes must be even and positive")
	case cfg.match == "stamp" && cfg.outFrameBytes != cfg.frameBytes:
		return errors.New("-match stamp needs frames back unchanged: use -match bytes")
	case cfg.warmup < 0 || cfg.grace < 0 || cfg.timeout <= 0 || cfg.connectConcurrency < 1:
		return errors.New("-warmup, -grace, -timeout and -connect-concurrency must be positive")
	case cfg.proto == "gateway" && !json.Valid([]byte(cfg.start)):
		return errors.New("-start is not valid JSON")
	case cfg.sessionUpdate != "" && cfg.proto != "openai":
		return errors.New("-session-update goes with -proto openai")
	case cfg.sessionUpdate != "" && !json.Valid([]byte(cfg.sessionUpdate)):
		return errors.New("-session-update is not valid JSON")
	}
	if cfg.mode == "pingpong" {
		if cfg.rounds < 1 {
			return errors.New("pingpong needs -n N (N >= 1)")
		}
		cfg.sessions = 1
		return nil
	}
	if cfg.sessions < 1 || cfg.rate <= 0 || cfg.durationS <= 0 {
		return errors.New("load needs -c SESSIONS -rate FPS -dur SECONDS, all positive")
	}
	return nil
}

// firstSecondFrames is how many frames a load session sends in its first second (0 in
// pingpong: one session, one frame at a time, no schedule).
func (cfg *config) firstSecondFrames() int {
	if cfg.mode != "load" {
		return 0
	}
	return int(cfg.rate + 0.5)
}

// framesPerSession is how many frames each session sends, warm-up included.
func (cfg *config) framesPerSession() int {
	if cfg.mode == "pingpong" {
		return cfg.warmup + cfg.rounds
	}
	return cfg.warmup + int(cfg.durationS*cfg.rate+0.5)
}

func main() {
	cfg, err := parseConfig(os.Args[1:])
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "goload:", err)
		}
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	debug.SetGCPercent(400) // few, short-lived allocations: trade a little memory for less GC
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	run := newRun(cfg)
	if cfg.mode == "pingpong" {
		run.pingpong(ctx)
	} else {
		run.load(ctx)
	}
	report := run.report(ctx.Err() == context.DeadlineExceeded)
	text, _ := json.Marshal(report)
	fmt.Println(string(text))
	if run.connected() == 0 {
		os.Exit(1)
	}
}
