package main

import (
	"math"
	"sort"
)

const cdfPoints = 200 // at most, in the report's "cdf"

// report is the one JSON object printed on stdout. Counts of frames are of measured frames
// (after the warm-up) unless their name says otherwise.
func (r *run) report(timedOut bool) map[string]interface{} {
	var sent, received, unsent, mismatched, stray, errs int
	var roundTrips, lags, firstSecond []float64
	readError := ""
	for _, s := range r.sessions {
		sent += s.sent
		received += s.received
		unsent += s.unsent
		mismatched += s.mismatched
		stray += s.stray
		errs += s.errors
		roundTrips = append(roundTrips, s.roundTrips...)
		lags = append(lags, s.lagsMs...)
		firstSecond = append(firstSecond, s.firstSecond...)
		if readError == "" && s.readError != "" && s.backCount < s.total {
			readError = s.readError
		}
	}
	sort.Float64s(roundTrips)
	sort.Float64s(lags)
	sort.Float64s(firstSecond)
	setups := append([]float64(nil), r.setupsMs...)
	sort.Float64s(setups)
	report := map[string]interface{}{
		"mode":               r.cfg.mode,
		"proto":              r.cfg.proto,
		"url":                r.cfg.url,
		"sessions":           r.cfg.sessions,
		"rate":               nil,
		"duration_s":         nil,
		"frame_bytes":        r.cfg.frameBytes,
		"out_frame_bytes":    r.cfg.outFrameBytes,
		"match":              r.cfg.match,
		"warmup":             r.cfg.warmup,
		"sent":               sent,
		"received":           received,
		"lost":               sent - received,
		"unsent":             unsent,
		"mismatched":         mismatched,
		"stray":              stray,
		"errors":             errs,
		"connect_failed":     r.connectFailed,
		"setup_ms":           map[string]interface{}{"p50": quantile(setups, 0.5), "p99": quantile(setups, 0.99), "max": quantile(setups, 1)},
		"rtt_ms":             roundTripSummary(roundTrips),
		"cdf":                cdf(roundTrips),
		"first_second_ms":    roundTripSummary(firstSecond), // warm-up or not
		"send_lag_ms":        map[string]interface{}{"p99": quantile(lags, 0.99), "max": quantile(lags, 1)},
		"window_s":           nil,
		"loadgen_cpu_s":      nil,
		"deflate":            r.cfg.deflate,
		"deflate_negotiated": deflateNegotiated.Load(),
		"timed_out":          timedOut,
		"error_sample":       nil,
		"read_error_sample":  nil,
	}
	if r.cfg.mode == "load" {
		report["rate"], report["duration_s"] = r.cfg.rate, r.cfg.durationS
	}
	if !r.windowFinish.IsZero() {
		report["window_s"] = round(r.windowFinish.Sub(r.windowBegin).Seconds(), 6)
		report["loadgen_cpu_s"] = round(r.cpuFinish-r.cpuBegin, 6)
	}
	if r.errorSample != "" {
		report["error_sample"] = r.errorSample
	}
	if readError != "" {
		report["read_error_sample"] = readError
	}
	return report
}

func roundTripSummary(sorted []float64) map[string]interface{} {
	summary := map[string]interface{}{"n": len(sorted), "mean": nil}
	if len(sorted) > 0 {
		total := 0.0
		for _, value := range sorted {
			total += value
		}
		summary["mean"] = round(total/float64(len(sorted)), 4)
	}
	for name, q := range map[string]float64{"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999,
		"max": 1} {
		summary[name] = quantile(sorted, q)
	}
	return summary
}

// quantile interpolates linearly between the closest ranks (numpy's default, like
// bench.relay.stats.percentile); nil (JSON null) for no values.
func quantile(sorted []float64, q float64) interface{} {
	if len(sorted) == 0 {
		return nil
	}
	return round(quantileOf(sorted, q), 4)
}

func quantileOf(sorted []float64, q float64) float64 {
	position := float64(len(sorted)-1) * q
	below := int(math.Floor(position))
	above := below + 1
	if above >= len(sorted) {
		return sorted[below]
	}
	return sorted[below] + (sorted[above]-sorted[below])*(position-float64(below))
}

// cdf is [[ms, fraction of round trips at or below]]: every value when there are few, else
// quantiles evenly spaced up to 0.99 and log-spaced in the tail (where the plots look).
func cdf(sorted []float64) [][2]float64 {
	points := [][2]float64{}
	if len(sorted) <= cdfPoints {
		for i, value := range sorted {
			points = append(points, [2]float64{round(value, 4), float64(i+1) / float64(len(sorted))})
		}
		return points
	}
	var fractions []float64
	for i := 0; i < 100; i++ { // 0, 0.01, …, 0.99
		fractions = append(fractions, float64(i)/100)
	}
	for step := 1; step <= 60; step++ { // 1 - 10^-(2 + step/20): 0.9911 … 0.99999
		fractions = append(fractions, 1-math.Pow(10, -(2+float64(step)/20)))
	}
	fractions = append(fractions, 1)
	for _, fraction := range fractions {
		points = append(points, [2]float64{round(quantileOf(sorted, fraction), 4),
			round(fraction, 6)})
	}
	return points
}

func round(value float64, digits int) float64 {
	scale := math.Pow(10, float64(digits))
	return math.Round(value*scale) / scale
}
