/* backline web: the server's speech (backline web --speech). The microphone is streamed to
 * the server over the page's WebSocket (ServerListener) and the server's voice is played
 * (ServerPlayer), with Web Audio. No dependencies: works offline. */
"use strict";

(function () {
  const INPUT_RATE = 16000; // what the page sends (microphone.js downsamples to it)
  const INPUT_CHUNK = 800; // samples per binary message: 50 ms
  const START_DELAY = 0.05; // seconds between a stream's first audio arriving and playing
  const MAX_BUFFERED = 256 * 1024; // bytes waiting on the socket before microphone audio is dropped

  let context = null;
  let workletLoaded = null; // the promise of loading microphone.js into the context
  const played = { chunks: 0, seconds: 0 }; // of the server's voice, through the speakers
  const captured = { seconds: 0 }; // of the microphone, sent to the server

  /** The page's one AudioContext, made on first need (null: no Web Audio here). */
  function audioContext() {
    if (context === null) {
      const Context = window.AudioContext || window.webkitAudioContext;
      if (!Context) return null;
      context = new Context();
    }
    return context;
  }

  /** Browsers start audio only after a click or a key press: call it from one. */
  function unlockAudio() {
    const ctx = audioContext();
    if (ctx !== null && ctx.state === "suspended") ctx.resume().catch(() => { /* later */ });
  }

  /** Whether the page can stream the microphone: null if it can, else why not. */
  function captureProblem() {
    if (!window.isSecureContext || !navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      return "insecure";
    }
    if (!(window.AudioContext || window.webkitAudioContext) || typeof window.AudioWorkletNode !== "function") {
      return "no-worklet";
    }
    return null;
  }

  function microphoneErrorMessage(error) {
    const name = error && error.name;
    if (name === "NotAllowedError" || name === "SecurityError") {
      return "The microphone is blocked for this page: allow it in the browser's site settings, or type your messages below.";
    }
    if (name === "NotFoundError" || name === "OverconstrainedError") {
      return "No microphone was found: connect one, or type your messages below.";
    }
    if (name === "NotReadableError" || name === "AbortError") {
      return "The microphone could not be opened (another program may be using it): check it, or type your messages below.";
    }
    return "The microphone could not start (" + (error && error.message ? error.message : error) + "): type your messages below.";
  }

  /**
   * The microphone, with the browser's echo cancellation, noise suppression and gain
   * control: open() resolves to the rate of the chunks onChunk(ArrayBuffer) gets (16 kHz),
   * or null if close() came first.
   */
  class Microphone {
    constructor(onChunk) {
      this.onChunk = onChunk;
      this.generation = 0;
      this.parts = null; // {stream, source, node}
    }

    async open() {
      const generation = ++this.generation;
      const ctx = audioContext();
      await ctx.resume();
      if (workletLoaded === null) workletLoaded = ctx.audioWorklet.addModule("static/microphone.js");
      await workletLoaded;
      const stream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
      });
      if (generation !== this.generation) { // closed meanwhile
        stream.getTracks().forEach((t) => t.stop());
        return null;
      }
      const source = ctx.createMediaStreamSource(stream);
      const node = new AudioWorkletNode(ctx, "backline-microphone", {
        numberOfInputs: 1, numberOfOutputs: 1, outputChannelCount: [1],
        processorOptions: { rate: INPUT_RATE, chunk: INPUT_CHUNK },
      });
      const rate = Math.min(INPUT_RATE, ctx.sampleRate);
      node.port.onmessage = (ev) => { if (generation === this.generation) this.onChunk(ev.data, rate); };
      source.connect(node);
      node.connect(ctx.destination); // it outputs silence; connected, it is always processed
      this.parts = { stream: stream, source: source, node: node };
      return rate;
    }

    close() {
      this.generation++;
      const parts = this.parts;
      this.parts = null;
      if (parts === null) return;
      parts.node.port.onmessage = null;
      parts.node.port.postMessage("stop");
      parts.source.disconnect();
      parts.node.disconnect();
      parts.stream.getTracks().forEach((t) => t.stop());
    }
  }

  /**
   * Listening through the server, with the interface of BacklineSpeech.Listener: hands-free
   * (startHandsFree/stop) streams the microphone until stopped, push-to-talk
   * (pttDown/pttUp) while held. The server's voice activity detection finds the turns;
   * audio_input_end tells it the microphone went off. Handlers: onSpeechStart() (push-to-
   * talk pressed: barge-in), onMode(mode), onError(message). send(message) sends a JSON
   * message, sendAudio(buffer) a binary one.
   */
  class ServerListener {
    constructor(handlers, send, sendAudio) {
      this.h = handlers;
      this.send = send;
      this.sendAudio = sendAudio;
      this.mode = "off"; // off | handsfree | ptt
      this.streaming = false; // audio_input sent, audio_input_end not yet
      this.mic = new Microphone((buffer, rate) => {
        if (!this.streaming) return;
        this.sendAudio(buffer);
        captured.seconds += buffer.byteLength / 2 / rate;
      });
    }

    get supported() { return captureProblem() === null; }

    startHandsFree() {
      if (!this.supported || this.mode === "handsfree") return;
      this._close();
      this._setMode("handsfree");
      this._open("handsfree");
    }

    stop() {
      this._close();
      this._setMode("off");
    }

    pttDown() {
      if (!this.supported || this.mode === "ptt") return;
      this._close();
      this._setMode("ptt");
      this.h.onSpeechStart(); // pressing the button is the clearest barge-in signal
      this._open("ptt");
    }

    pttUp() {
      if (this.mode !== "ptt") return;
      this._close(true);
      this._setMode("off");
    }

    async _open(mode) {
      let rate;
      try {
        rate = await this.mic.open();
      } catch (e) {
        if (this.mode === mode) {
          this.h.onError(microphoneErrorMessage(e));
          this._close(true);
          this._setMode("off");
        }
        return;
      }
      if (rate === null || this.mode !== mode) return;
      this.send({ type: "audio_input", sample_rate: rate });
      this.streaming = true;
    }

    _close(ended) {
      this.mic.close();
      if (this.streaming || ended) this.send({ type: "audio_input_end" });
      this.streaming = false;
    }

    _setMode(mode) {
      this.mode = mode;
      this.h.onMode(mode);
    }
  }

  /**
   * Plays the server's voice: audio_start (a stream and its sample rate), binary messages
   * (16-bit mono PCM), audio_end, audio_clear. Each chunk is scheduled right after the one
   * before. How far a stream has played goes back as report(stream, seconds, done): when a
   * chunk ends, and with done once a stream that ended has all played. Muted (speaking off,
   * or the browser not letting the page play sound yet), audio counts as played when it
   * arrives: the text on the page is what is delivered, as with the browser's speech.
   */
  class ServerPlayer {
    constructor(report) {
      this.report = report;
      this.muted = false;
      this.s = null;
      this.next = 0; // context time when what is scheduled ends
      this.onBlocked = null;
      this.blockedSaid = false;
    }

    start(stream, rate) {
      // A stream before it that has not ended plays on; the server no longer counts it.
      this.s = { id: stream, rate: rate, chunks: [], played: 0, received: 0, reported: 0, ended: false, done: false };
    }

    data(buffer) {
      const s = this.s;
      if (s === null || s.done || buffer.byteLength % 2 !== 0) return;
      const samples = new Int16Array(buffer);
      const seconds = samples.length / s.rate;
      s.received += seconds;
      const ctx = this.muted ? null : audioContext();
      if (ctx === null || ctx.state !== "running") { // delivered as text
        if (!this.muted && !this.blockedSaid && this.onBlocked) { this.blockedSaid = true; this.onBlocked(); }
        s.played += seconds;
        this._report(s);
        return;
      }
      const audio = ctx.createBuffer(1, samples.length, s.rate);
      const channel = audio.getChannelData(0);
      for (let i = 0; i < samples.length; i++) channel[i] = samples[i] / 32768;
      const source = ctx.createBufferSource();
      source.buffer = audio;
      source.connect(ctx.destination);
      const at = Math.max(this.next, ctx.currentTime + START_DELAY);
      this.next = at + audio.duration;
      const chunk = { source: source, at: at, seconds: audio.duration };
      s.chunks.push(chunk);
      source.onended = () => {
        const i = s.chunks.indexOf(chunk);
        if (i < 0) return; // stopped
        s.chunks.splice(i, 1);
        s.played += chunk.seconds;
        played.chunks++;
        played.seconds += chunk.seconds;
        if (this.s === s) this._report(s);
      };
      source.start(at);
    }

    end(stream) {
      const s = this.s;
      if (s === null || s.id !== stream) return;
      s.ended = true;
      this._report(s);
    }

    clear(stream) {
      const s = this.s;
      if (s === null || s.id !== stream) return;
      this._stop(s);
      this.s = null;
    }

    /** Speaking off (or on again): what is scheduled stops and counts as delivered. */
    setMuted(muted) {
      this.muted = muted;
      const s = this.s;
      if (muted && s !== null) {
        for (const chunk of s.chunks) s.played += chunk.seconds;
        this._stop(s);
        this._report(s);
      }
    }

    /** The connection dropped or the page is going: stop, report nothing. */
    reset() {
      if (this.s !== null) this._stop(this.s);
      this.s = null;
    }

    _stop(s) {
      const chunks = s.chunks;
      s.chunks = [];
      for (const chunk of chunks) {
        chunk.source.onended = null;
        try { chunk.source.stop(); } catch (e) { /* not started */ }
      }
      this.next = 0;
    }

    _position(s) {
      const ctx = audioContext();
      let seconds = s.played;
      if (ctx !== null) {
        const now = ctx.currentTime - (ctx.outputLatency || ctx.baseLatency || 0);
        for (const chunk of s.chunks) {
          if (now > chunk.at) seconds += Math.min(chunk.seconds, now - chunk.at);
        }
      }
      return seconds;
    }

    _report(s) {
      if (s.done) return;
      const done = s.ended && s.chunks.length === 0;
      const seconds = done ? s.received : Math.max(s.reported, this._position(s));
      s.reported = seconds;
      if (done) {
        s.done = true;
        if (this.s === s) this.s = null;
      }
      this.report(s.id, seconds, done);
    }
  }

  window.BacklineServerSpeech = {
    ServerListener: ServerListener,
    ServerPlayer: ServerPlayer,
    unlockAudio: unlockAudio,
    captureProblem: captureProblem,
    /** The AudioContext's state, how much of the server's voice played through it (chunks,
     * seconds), and how many seconds of microphone audio went to the server (sent). */
    audioState: () => ({
      context: context === null ? null : context.state,
      chunks: played.chunks,
      seconds: played.seconds,
      sent: captured.seconds,
    }),
  };
})();
