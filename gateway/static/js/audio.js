// The page's audio: the microphone (capture worklet) and the speaker (playback worklet).
import { MIC_RATE, samplesToMs } from "./pcm.js";

const WORKLETS = new URL("./worklets/", import.meta.url);

// Captures the microphone and hands out 20 ms PCM16 frames at `rate` (16 kHz until
// `setRate`) with their level.
export class Microphone {
  constructor({ onFrame, onLevel }) {
    this.onFrame = onFrame;
    this.onLevel = onLevel;
    this.context = null;
    this.node = null;
    this.stream = null;
    this.framesCaptured = 0;
    this.rate = MIC_RATE;
  }

  // Frames at `rate` from now on; frames of the old rate still on their way are dropped.
  setRate(rate) {
    if (rate === this.rate) return;
    this.rate = rate;
    if (this.node !== null) this.node.port.postMessage({ type: "rate", rate });
  }

  get running() {
    return this.context !== null;
  }

  // The microphone's track (what a peer connection sends), or null when it is off.
  get track() {
    return this.stream === null ? null : this.stream.getAudioTracks()[0] || null;
  }

  async start() {
    if (this.context !== null) return;
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      throw new Error("this page needs a secure context (https:// or http://localhost) for the microphone");
    }
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    // The context runs at the device's rate; the worklet resamples to `rate` itself, which
    // works in every browser (not all accept a microphone in a context of another rate).
    const context = new AudioContext({ latencyHint: "interactive" });
    let node;
    try {
      await context.audioWorklet.addModule(new URL("capture.js", WORKLETS));
      const source = context.createMediaStreamSource(stream);
      node = new AudioWorkletNode(context, "capture-processor", {
        numberOfInputs: 1,
        numberOfOutputs: 1,
        channelCount: 1,
        channelCountMode: "explicit",
        processorOptions: { rate: this.rate },
      });
      node.port.onmessage = ({ data }) => {
        if (data.type !== "frame" || data.rate !== this.rate) return;
        this.framesCaptured += 1;
        this.onLevel(data.level);
        this.onFrame(data.pcm);
      };
      source.connect(node);
      node.connect(context.destination); // pulls the graph; the node outputs silence
      await context.resume();
    } catch (error) {
      stream.getTracks().forEach((track) => track.stop());
      await context.close();
      throw error;
    }
    this.context = context;
    this.node = node;
    this.stream = stream;
  }

  async stop() {
    const { context, stream } = this;
    this.context = null;
    this.node = null;
    this.stream = null;
    if (stream) stream.getTracks().forEach((track) => track.stop());
    if (context) await context.close();
    this.onLevel(-100);
  }
}

// Plays the assistant's PCM16 at the session's output rate and says how much was heard.
// `onPlayed(responseId, playedMs, final)` is called every ~100 ms of playback, when a
// response's audio has played to its end (final), and right after a clear (final).
export class Speaker {
  constructor({ onPlayed }) {
    this.onPlayed = onPlayed;
    this.context = null;
    this.node = null;
    this.rate = 0;
    this.playedSamples = 0;
    this.underruns = 0;
    this.receivedSamples = 0;
  }

  // Must first run inside a user gesture (a click), or the browser keeps it silent.
  async open(rate) {
    if (this.context !== null && this.rate === rate) return;
    await this.close();
    // A context at the output rate plays the PCM as it is: no resampling on the page.
    const context = new AudioContext({ sampleRate: rate, latencyHint: "interactive" });
    await context.audioWorklet.addModule(new URL("playback.js", WORKLETS));
    const node = new AudioWorkletNode(context, "playback-processor", {
      numberOfInputs: 0,
      numberOfOutputs: 1,
      outputChannelCount: [1],
    });
    node.port.onmessage = ({ data }) => {
      if (data.type !== "played") return;
      this.playedSamples = data.total;
      this.underruns = data.underruns;
      this.onPlayed(data.responseId, samplesToMs(data.samples, rate), data.reason !== "progress");
    };
    node.connect(context.destination);
    await context.resume();
    this.context = context;
    this.node = node;
    this.rate = rate;
  }

  play(pcm, responseId) {
    if (this.node === null || pcm.byteLength < 2) return;
    this.receivedSamples += pcm.byteLength >> 1;
    const whole = pcm.byteLength & 1 ? pcm.slice(0, pcm.byteLength - 1) : pcm;
    this.node.port.postMessage({ type: "chunk", pcm: whole, responseId }, [whole]);
  }

  // No more audio will come for this response: play its tail without waiting for more.
  end(responseId) {
    if (this.node !== null) this.node.port.postMessage({ type: "end", responseId });
  }

  // A cancelled reply: drop what is left of it (and stop it if it is playing).
  drop(responseId) {
    if (this.node !== null) this.node.port.postMessage({ type: "drop", responseId });
  }

  // Barge-in: silence now, drop everything queued.
  clear() {
    if (this.node !== null) this.node.port.postMessage({ type: "clear" });
  }

  async close() {
    const context = this.context;
    this.context = null;
    this.node = null;
    if (context) await context.close();
  }
}
