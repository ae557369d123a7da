// Pure audio helpers shared by the page and its worklets: no DOM, no Web Audio objects.
// They run in the AudioWorklet scope as well as in Node (tests/js), so they use nothing else.

export const MIC_RATE = 16000;
export const FRAME_MS = 20;
const SESSION_RATES = [8000, 16000, 24000, 48000];

// The rate to capture at, from session.started's audio: the upstream's own input rate when
// the gateway names one (then `switchTo` says to tell it with session.update), so that the
// gateway relays the microphone without resampling it; else the session's input rate.
export function captureRate(audio) {
  const upstream = audio.upstream_input_rate;
  if (upstream && upstream !== audio.input_rate && SESSION_RATES.includes(upstream)) {
    return { rate: upstream, switchTo: upstream };
  }
  return { rate: audio.input_rate, switchTo: null };
}

// Float samples in [-1, 1] to PCM16 (little-endian on every platform browsers run on).
export function floatToInt16(samples) {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    out[i] = s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff);
  }
  return out;
}

export function int16ToFloat(pcm) {
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i] / 0x8000;
  return out;
}

// Level of a block in dBFS (full-scale sine ≈ -3), floored at -100 for silence.
export function levelDbfs(samples) {
  if (samples.length === 0) return -100;
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i];
  const rms = Math.sqrt(sum / samples.length);
  return rms > 1e-5 ? Math.max(-100, 20 * Math.log10(rms)) : -100;
}

// A streaming resampler from the device rate to `outRate`. Downsampling averages the input
// samples that fall into each output period (a box filter: cheap, and it keeps most aliasing
// out of the speech band); upsampling interpolates linearly. State carries across blocks, so
// the 128-sample blocks of an AudioWorklet resample as one continuous signal.
export class StreamResampler {
  constructor(inRate, outRate) {
    if (!(inRate > 0) || !(outRate > 0)) throw new RangeError("rates must be positive");
    this.step = inRate / outRate; // input samples per output sample
    this.sum = 0;
    this.count = 0;
    this.position = 0; // input samples consumed, relative to `nextAt`'s origin
    this.nextAt = this.step;
    this.previous = 0; // last input sample (for interpolation)
  }

  // Resample `input` (Float32Array) and call `emit(sample)` for each output sample.
  push(input, emit) {
    if (this.step >= 1) {
      for (let i = 0; i < input.length; i++) {
        this.sum += input[i];
        this.count += 1;
        this.position += 1;
        if (this.position >= this.nextAt) {
          emit(this.sum / this.count);
          this.sum = 0;
          this.count = 0;
          this.nextAt += this.step;
        }
      }
    } else {
      for (let i = 0; i < input.length; i++) {
        const current = input[i];
        // Output instants falling between the previous sample (position) and this one.
        while (this.nextAt <= this.position + 1) {
          const t = this.nextAt - this.position;
          emit(this.previous + (current - this.previous) * t);
          this.nextAt += this.step;
        }
        this.previous = current;
        this.position += 1;
      }
    }
    // Keep the counters small: only their difference matters.
    if (this.position > 1e6) {
      this.nextAt -= this.position;
      this.position = 0;
    }
  }
}

// Cuts a stream of PCM16 samples into fixed frames of `frameSamples`.
export class Framer {
  constructor(frameSamples) {
    this.frame = new Int16Array(frameSamples);
    this.filled = 0;
  }

  // Adds one float sample; returns a finished frame (a new Int16Array) or null.
  push(sample) {
    const s = Math.max(-1, Math.min(1, sample));
    this.frame[this.filled++] = s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff);
    if (this.filled < this.frame.length) return null;
    const done = this.frame;
    this.frame = new Int16Array(done.length);
    this.filled = 0;
    return done;
  }
}

// Milliseconds of audio in `samples` at `rate`, rounded down (what was really heard).
export function samplesToMs(samples, rate) {
  return Math.floor((samples * 1000) / rate);
}
