// AudioWorklet: the assistant's speech, played gap-free from a queue of PCM16 chunks.
//
// The page posts {type:"chunk", pcm: ArrayBuffer, responseId} as audio arrives, {type:"end",
// responseId} when a response's audio is complete, {type:"drop", responseId} when a response
// was cancelled, and {type:"clear"} on barge-in. A response
// starts playing once `prebuffer` samples are queued (or its audio is complete), so network
// jitter does not cut it into pieces; an underrun mid-response is counted and buffers again.
// The processor reports what was really played: {type:"played", responseId, samples, total}
// every `reportEvery` samples, when a response finishes, and at once after a clear.

class PlaybackProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const params = options.processorOptions || {};
    this.prebuffer = params.prebufferSamples || Math.round(sampleRate * 0.08);
    this.reportEvery = params.reportEverySamples || Math.round(sampleRate * 0.1);
    this.queue = []; // {samples: Int16Array, offset, responseId}
    this.queued = 0;
    this.playing = false;
    this.ended = new Set(); // response ids whose audio is complete
    this.current = null; // {responseId, samples, sinceReport}
    this.total = 0;
    this.underruns = 0;
    this.port.onmessage = (message) => this.receive(message.data);
  }

  receive(data) {
    if (data.type === "chunk") {
      const samples = new Int16Array(data.pcm);
      if (samples.length === 0) return;
      this.queue.push({ samples, offset: 0, responseId: data.responseId });
      this.queued += samples.length;
    } else if (data.type === "end") {
      this.ended.add(data.responseId);
    } else if (data.type === "clear") {
      // A reply still prebuffering was not heard at all: say so (0 samples) for its truncation.
      if (this.current === null && this.queue.length > 0) this.start(this.queue[0].responseId);
      this.queue = [];
      this.queued = 0;
      this.playing = false;
      this.ended.clear();
      this.finishCurrent("cleared");
    } else if (data.type === "drop") {
      // One reply was cancelled: drop its audio only (the next reply's may already be queued).
      const dropped = this.queue.filter((chunk) => chunk.responseId === data.responseId);
      for (const chunk of dropped) this.queued -= chunk.samples.length - chunk.offset;
      this.queue = this.queue.filter((chunk) => chunk.responseId !== data.responseId);
      this.ended.delete(data.responseId);
      if (this.current !== null && this.current.responseId === data.responseId) {
        this.finishCurrent("cleared");
        this.playing = false;
      }
    }
  }

  start(responseId) {
    this.current = { responseId, samples: 0, sinceReport: 0 };
  }

  report(reason) {
    const c = this.current;
    if (c === null) return;
    this.port.postMessage({
      type: "played",
      reason,
      responseId: c.responseId,
      samples: c.samples,
      total: this.total,
      underruns: this.underruns,
    });
    c.sinceReport = 0;
  }

  finishCurrent(reason) {
    if (this.current !== null) this.report(reason);
    this.current = null;
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    if (!this.playing) {
      const head = this.queue[0];
      const complete = head !== undefined && this.ended.has(head.responseId);
      if (this.queued >= this.prebuffer || (complete && this.queued > 0)) this.playing = true;
    }
    let written = 0;
    while (this.playing && written < out.length && this.queue.length > 0) {
      const chunk = this.queue[0];
      if (this.current === null || this.current.responseId !== chunk.responseId) {
        if (this.current !== null) this.ended.delete(this.current.responseId);
        this.finishCurrent("done");
        this.start(chunk.responseId);
      }
      const n = Math.min(out.length - written, chunk.samples.length - chunk.offset);
      for (let i = 0; i < n; i++) out[written + i] = chunk.samples[chunk.offset + i] / 0x8000;
      chunk.offset += n;
      written += n;
      this.queued -= n;
      this.total += n;
      this.current.samples += n;
      this.current.sinceReport += n;
      if (chunk.offset === chunk.samples.length) this.queue.shift();
    }
    out.fill(0, written);
    for (let ch = 1; ch < outputs[0].length; ch++) outputs[0][ch].set(out);
    if (this.current !== null && this.queue.length === 0) {
      if (this.ended.has(this.current.responseId)) {
        this.ended.delete(this.current.responseId);
        this.finishCurrent("done");
        this.playing = false;
      } else if (this.playing && written < out.length) {
        this.underruns += 1; // the rest of this response is late: buffer again
        this.playing = false;
      }
    }
    if (this.current !== null && this.current.sinceReport >= this.reportEvery) {
      this.report("progress");
    }
    return true;
  }
}

registerProcessor("playback-processor", PlaybackProcessor);
