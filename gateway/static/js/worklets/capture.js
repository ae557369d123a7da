// AudioWorklet: microphone → PCM16 frames at the session's input rate (16 kHz until told
// otherwise), 20 ms each, with their level and rate. Runs on the audio thread: it only
// resamples, frames and posts; the page sends.
import { FRAME_MS, Framer, MIC_RATE, StreamResampler, int16ToFloat, levelDbfs } from "../pcm.js";

class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.setRate((options.processorOptions && options.processorOptions.rate) || MIC_RATE);
    this.port.onmessage = ({ data }) => {
      if (data.type === "rate") this.setRate(data.rate);
    };
    this.emit = (sample) => {
      const frame = this.framer.push(sample);
      if (frame === null) return;
      const level = levelDbfs(int16ToFloat(frame));
      const message = { type: "frame", pcm: frame.buffer, level, rate: this.rate };
      this.port.postMessage(message, [frame.buffer]);
    };
  }

  // From here on, frames at `rate` (a partial frame of the old rate is dropped).
  setRate(rate) {
    this.rate = rate;
    // `sampleRate` is the AudioContext's rate, a global of the worklet scope.
    this.resampler = new StreamResampler(sampleRate, rate);
    this.framer = new Framer((rate * FRAME_MS) / 1000);
  }

  process(inputs) {
    const channels = inputs[0];
    // The first channel is the microphone: browsers deliver it mono or duplicated.
    if (channels && channels.length > 0) this.resampler.push(channels[0], this.emit);
    return true; // keep running while the node is connected
  }
}

registerProcessor("capture-processor", CaptureProcessor);
