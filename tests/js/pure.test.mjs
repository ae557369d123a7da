// Node's own test runner over the page's pure modules (no browser, no DOM):
//   node --test tests/js/
// Run by tests/unit/test_static_js.py when Node is installed.
import assert from "node:assert/strict";
import { test } from "node:test";

import { reconnectDelay, sessionUrl } from "../../gateway/static/js/connection.js";
import {
  Framer,
  StreamResampler,
  captureRate,
  floatToInt16,
  int16ToFloat,
  levelDbfs,
  samplesToMs,
} from "../../gateway/static/js/pcm.js";

function sine(freq, rate, n, amplitude = 0.5) {
  return Float32Array.from({ length: n }, (_, i) => amplitude * Math.sin((2 * Math.PI * freq * i) / rate));
}

// Resamples `input` in 128-sample blocks, as an AudioWorklet delivers it.
function resample(input, inRate, outRate) {
  const resampler = new StreamResampler(inRate, outRate);
  const out = [];
  for (let i = 0; i < input.length; i += 128) resampler.push(input.subarray(i, i + 128), (s) => out.push(s));
  return Float32Array.from(out);
}

// Zero crossings per second: the frequency of a clean sine.
function frequency(samples, rate) {
  let crossings = 0;
  for (let i = 1; i < samples.length; i++) if (samples[i - 1] < 0 !== samples[i] < 0) crossings += 1;
  return (crossings / 2) * (rate / samples.length);
}

test("48 kHz to 16 kHz keeps the length, the pitch and the level of speech-band audio", () => {
  const out = resample(sine(440, 48000, 48000), 48000, 16000);
  assert.equal(out.length, 16000);
  assert.ok(Math.abs(frequency(out, 16000) - 440) < 3);
  assert.ok(Math.abs(levelDbfs(out) - levelDbfs(sine(440, 16000, 16000))) < 0.5);
});

test("44.1 kHz (a non-integer ratio) to 16 kHz gives the right number of samples", () => {
  const out = resample(sine(300, 44100, 44100), 44100, 16000);
  assert.ok(Math.abs(out.length - 16000) <= 1, String(out.length));
  assert.ok(Math.abs(frequency(out, 16000) - 300) < 3);
});

test("8 kHz up to 16 kHz interpolates", () => {
  const out = resample(sine(200, 8000, 8000), 8000, 16000);
  assert.ok(Math.abs(out.length - 16000) <= 2, String(out.length));
  assert.ok(Math.abs(frequency(out, 16000) - 200) < 3);
});

test("a tone far above 8 kHz is attenuated, not folded into the speech band at full level", () => {
  const out = resample(sine(15000, 48000, 48000), 48000, 16000);
  assert.ok(levelDbfs(out) < levelDbfs(sine(15000, 48000, 48000)) - 6);
});

test("frames are 20 ms of PCM16 at 16 kHz, clipped", () => {
  const framer = new Framer(320);
  const frames = [];
  for (let i = 0; i < 700; i++) {
    const frame = framer.push(i % 2 ? 2 : -2);
    if (frame) frames.push(frame);
  }
  assert.equal(frames.length, 2);
  assert.equal(frames[0].length, 320);
  assert.equal(frames[0][0], -32768);
  assert.equal(frames[0][1], 32767);
});

test("PCM16 conversions round-trip and levels are in dBFS", () => {
  const pcm = floatToInt16(Float32Array.from([0, 0.5, -0.5, 1, -1]));
  assert.deepEqual(Array.from(pcm), [0, 16384, -16384, 32767, -32768]);
  assert.ok(Math.abs(int16ToFloat(pcm)[1] - 0.5) < 1e-4);
  assert.equal(levelDbfs(new Float32Array(10)), -100);
  assert.ok(Math.abs(levelDbfs(sine(1000, 48000, 48000, 1)) + 3.01) < 0.05);
  assert.equal(samplesToMs(2400, 24000), 100);
  assert.equal(samplesToMs(2399, 24000), 99);
});

test("reconnects back off and stop at the resume window", () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((n) => reconnectDelay(n, 0)), [250, 500, 1000, 2000, 4000, 4000]);
  assert.equal(reconnectDelay(0, 29800), null);
  assert.equal(reconnectDelay(2, 28000, 30000), 1000);
  assert.equal(reconnectDelay(3, 28000, 30000), null);
});

test("the socket URL follows the page: wss behind TLS, ws on localhost, token in the query", () => {
  assert.equal(
    sessionUrl({ protocol: "https:", host: "voice.example.com" }, "a.b c"),
    "wss://voice.example.com/v1/session?token=a.b+c",
  );
  assert.equal(sessionUrl({ protocol: "http:", host: "localhost:8080" }, ""), "ws://localhost:8080/v1/session");
});

test("the page captures at the upstream's own input rate and tells the gateway once", () => {
  // OpenAI takes 24 kHz: switch from the 16 kHz the session started with.
  assert.deepEqual(captureRate({ input_rate: 16000, output_rate: 24000, upstream_input_rate: 24000 }), {
    rate: 24000,
    switchTo: 24000,
  });
  // Already there (a resumed session that switched before, or the local model): no update.
  assert.deepEqual(captureRate({ input_rate: 24000, output_rate: 24000, upstream_input_rate: 24000 }), {
    rate: 24000,
    switchTo: null,
  });
  // Text mode (no upstream rate) or a rate the protocol does not take: keep the session's.
  assert.deepEqual(captureRate({ input_rate: 16000, output_rate: 24000 }), { rate: 16000, switchTo: null });
  assert.deepEqual(captureRate({ input_rate: 16000, output_rate: 24000, upstream_input_rate: 22050 }), {
    rate: 16000,
    switchTo: null,
  });
});
