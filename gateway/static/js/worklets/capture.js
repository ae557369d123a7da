// AudioWorklet: microphone → PCM16 frames at 16 kHz (20 ms each), with their level.
// Runs on the audio thread: it only resamples, frames and posts; the page sends.
import { FRAME_MS, Framer, MIC_RATE, StreamResampler, int16ToFloat, levelDbfs } from "../pcm.js";

class CaptureProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    // `sampleRate` is the AudioContext's rate, a global of the worklet scope.
    this.resampler = new StreamResampler(sampleRate, MIC_RATE);
    this.framer = new Framer((MIC_RATE * FRAME_MS) / 1000);
    this.emit = (sample) => {
      const frame = this.framer.push(sample);
      if (frame === null) return;
      const level = levelDbfs(int16ToFloat(frame));
      this.port.postMessage({ type: "frame", pcm: frame.buffer, level }, [frame.buffer]);
    };
  }

  process(inputs) {
    const channels = inputs[0];
    // The first channel is the microphone: browsers deliver it mono or duplicated.
    if (channels && channels.length > 0) this.resampler.push(channels[0], this.emit);
    return true; // keep running while the node is connected
  }
}

registerProcessor("capture-processor", CaptureProcessor);
