/* backline web: the microphone as 16 kHz 16-bit mono PCM, made in the audio thread (an
 * AudioWorklet; voice.js loads it). Channels are averaged, then every output sample is
 * the mean of the input samples it spans (a box filter: enough for speech). Chunks of
 * `chunk` samples are posted to the page as ArrayBuffers (little-endian, as browsers
 * are). No dependencies. */
"use strict";

class BacklineMicrophone extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const o = (options && options.processorOptions) || {};
    this.rate = Math.min(o.rate || 16000, sampleRate); // never above the context's rate
    this.step = sampleRate / this.rate; // input samples per output sample (1 or more)
    this.chunk = o.chunk || 800;
    this.out = new Int16Array(this.chunk);
    this.n = 0;
    this.sum = 0;
    this.count = 0;
    this.pos = 0;
    this.alive = true;
    this.port.onmessage = (ev) => { if (ev.data === "stop") this.alive = false; };
  }

  process(inputs) {
    if (!this.alive) return false; // the page closed the microphone: let this node go
    const input = inputs[0];
    if (!input || input.length === 0) return true;
    const channels = input.length;
    const frames = input[0].length;
    for (let i = 0; i < frames; i++) {
      let x = 0;
      for (let c = 0; c < channels; c++) x += input[c][i];
      this.sum += x / channels;
      this.count++;
      this.pos += 1;
      if (this.pos >= this.step) {
        this.pos -= this.step;
        const v = Math.round((this.sum / this.count) * 32767);
        this.sum = 0;
        this.count = 0;
        this.out[this.n++] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
        if (this.n === this.chunk) {
          const buffer = this.out.buffer;
          this.port.postMessage(buffer, [buffer]);
          this.out = new Int16Array(this.chunk);
          this.n = 0;
        }
      }
    }
    return true;
  }
}

registerProcessor("backline-microphone", BacklineMicrophone);
