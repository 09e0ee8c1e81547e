/* backline web: the browser's speech, in (Listener) and out (Speaker). No dependencies. */
"use strict";

(function () {
  const Recognition = window.SpeechRecognition || window.webkitSpeechRecognition || null;
  const FATAL_ERRORS = new Set([
    "not-allowed", "service-not-allowed", "audio-capture", "network", "language-not-supported",
  ]);

  /** What a recognition error code means to the user, and what to do (typing always works). */
  function recognitionErrorMessage(code) {
    switch (code) {
      case "not-allowed":
        return "The microphone is blocked for this page: allow it in the browser's site settings, or type your messages below.";
      case "service-not-allowed":
        return "This browser does not offer its speech recognition service here (Chromium builds and some privacy settings turn it off): use Google Chrome or Edge, or type your messages below.";
      case "network":
        return "Speech recognition needs the network: the browser sends your audio to its vendor (Google for Chrome) and could not reach it. Check the connection, or type your messages below.";
      case "audio-capture":
        return "No microphone was found, or another program is using it: check the microphone, or type your messages below.";
      case "language-not-supported":
        return "The browser cannot recognise speech in this language: type your messages below.";
      default:
        return "Speech recognition failed (" + code + "): type your messages below.";
    }
  }

  /**
   * Speech recognition, hands-free (continuous, restarted when the browser ends it) or
   * push-to-talk (listens while held, one turn on release). Handlers: onSpeechStart(),
   * onInterim(text), onFinal(text), onSpeechEnd(), onMode(mode), onError(message).
   * A final turn is always followed by onSpeechEnd, so a front end can send the turn
   * before it says the user stopped speaking.
   */
  class Listener {
    constructor(handlers) {
      this.h = handlers;
      this.mode = "off"; // off | handsfree | ptt
      this.rec = null;
      this.speaking = false;
      this.interim = "";
      this.collected = "";
    }

    get supported() { return Recognition !== null; }

    startHandsFree() {
      if (!this.supported) return;
      this._abort();
      this._setMode("handsfree");
      this._start();
    }

    stop() {
      this._abort();
      this._speechEnd();
      this._setMode("off");
    }

    pttDown() {
      if (!this.supported || this.mode === "ptt") return;
      this._abort();
      this.collected = "";
      this._setMode("ptt");
      this._speechStart(); // pressing the button is the clearest barge-in signal
      this._start();
    }

    pttUp() {
      if (this.mode !== "ptt" || this.rec === null) return;
      try { this.rec.stop(); } catch (e) { this._ended(); } // results, then onend, follow
    }

    _setMode(mode) {
      this.mode = mode;
      this.h.onMode(mode);
    }

    _start() {
      const rec = new Recognition();
      rec.continuous = true;
      rec.interimResults = true;
      rec.lang = navigator.language || "en-US";
      rec.onspeechstart = () => { if (rec === this.rec) this._speechStart(); };
      rec.onspeechend = () => {
        // Push-to-talk: the user speaks until they let go, pauses included.
        if (rec === this.rec && !this.interim && this.mode !== "ptt") this._speechEnd();
      };
      rec.onresult = (ev) => { if (rec === this.rec) this._results(ev); };
      rec.onerror = (ev) => { if (rec === this.rec) this._error(ev.error); };
      rec.onend = () => { if (rec === this.rec) this._ended(); };
      this.rec = rec;
      try {
        rec.start();
      } catch (e) {
        this.rec = null;
        this.h.onError("Speech recognition could not start: " + e.message);
        this._setMode("off");
      }
    }

    _abort() {
      const rec = this.rec;
      this.rec = null; // its late events are ignored
      if (rec !== null) { try { rec.abort(); } catch (e) { /* already ended */ } }
    }

    _results(ev) {
      let interim = "";
      for (let i = ev.resultIndex; i < ev.results.length; i++) {
        const result = ev.results[i];
        const text = result[0].transcript;
        if (result.isFinal) this._final(text);
        else interim += text;
      }
      this.interim = interim.trim();
      if (this.interim) {
        this._speechStart();
        this.h.onInterim(this.mode === "ptt" ? joinText(this.collected, this.interim) : this.interim);
      }
    }

    _final(text) {
      text = text.trim();
      this.interim = "";
      if (!text) return;
      if (this.mode === "ptt") {
        this.collected = joinText(this.collected, text);
        this.h.onInterim(this.collected);
        return;
      }
      this._speechStart();
      this.h.onInterim("");
      this.h.onFinal(text);
      this._speechEnd();
    }

    _error(code) {
      if (code === "no-speech" || code === "aborted") return;
      this.h.onError(recognitionErrorMessage(code));
      if (FATAL_ERRORS.has(code)) {
        this._abort();
        this._speechEnd();
        this._setMode("off");
      }
    }

    _ended() {
      this.rec = null;
      this.interim = "";
      if (this.mode === "ptt") {
        const text = this.collected.trim();
        this.collected = "";
        this.h.onInterim("");
        if (text) this.h.onFinal(text);
        this._speechEnd();
        this._setMode("off");
      } else if (this.mode === "handsfree") {
        this._speechEnd();
        this._start(); // browsers end continuous recognition after a while
      }
    }

    _speechStart() {
      if (!this.speaking) { this.speaking = true; this.h.onSpeechStart(); }
    }

    _speechEnd() {
      if (this.speaking) { this.speaking = false; this.h.onSpeechEnd(); }
    }
  }

  function joinText(a, b) { return a && b ? a + " " + b : a || b; }

  // -- what this browser can do ----------------------------------------------------------------

  /**
   * Whether speech recognition can work here: "present", "absent" (no interface: Firefox),
   * or "no-service" (the browser's own interface with no service behind it: Chromium builds,
   * Brave and Opera ship webkitSpeechRecognition but not Google's service, so it fails when
   * started). A recognition the page was given (a polyfill) is taken as it is.
   */
  function recognitionSupport() {
    if (Recognition === null) return "absent";
    if (!isNative(Recognition)) return "present";
    const data = navigator.userAgentData;
    const brands = data && Array.isArray(data.brands) ? data.brands.map((b) => b.brand) : [];
    const chromium = brands.includes("Chromium");
    const withService = brands.includes("Google Chrome") || brands.includes("Microsoft Edge");
    return chromium && !withService ? "no-service" : "present";
  }

  function isNative(fn) {
    try { return /\{\s*\[native code\]\s*\}\s*$/.test(Function.prototype.toString.call(fn)); }
    catch (e) { return false; }
  }

  /**
   * Whether the page can have a microphone: "ok", "insecure" (not https or localhost: the
   * browser gives it none), "blocked" (permission denied), "none" (no input device), or
   * "unknown" (the browser would not say; starting will tell).
   */
  async function microphoneState() {
    if (!window.isSecureContext || !navigator.mediaDevices) return "insecure";
    try {
      const permission = await navigator.permissions.query({ name: "microphone" });
      if (permission.state === "denied") return "blocked";
    } catch (e) { /* not every browser can be asked */ }
    try {
      const devices = await navigator.mediaDevices.enumerateDevices();
      return devices.some((d) => d.kind === "audioinput") ? "ok" : "none";
    } catch (e) {
      return "unknown";
    }
  }

  /** What the browser can do for voice, found before anything is offered. */
  async function detectVoice() {
    return { recognition: recognitionSupport(), microphone: await microphoneState() };
  }

  /** Calls onChange() when a microphone is plugged in or out, or its permission changes. */
  function watchVoice(onChange) {
    if (navigator.mediaDevices && navigator.mediaDevices.addEventListener) {
      navigator.mediaDevices.addEventListener("devicechange", onChange);
    }
    if (navigator.permissions) {
      navigator.permissions.query({ name: "microphone" })
        .then((permission) => { permission.onchange = onChange; })
        .catch(() => { /* not every browser can be asked */ });
    }
  }

  const SENTENCE_END = /[.!?…。！？]+["'”’)\]]*(?:\s+|$)|\n+/g;

  /**
   * Speaks output segments sentence by sentence as their text streams in, and reports
   * each one's playout: report(segment, spokenText, interrupted). A finished segment
   * reports all its text; a cut one reports the prefix that was spoken: finished
   * sentences, plus the words of the current sentence the browser's boundary events
   * confirmed (none, where a voice sends no boundary events). With speaking off, or
   * no speechSynthesis, text counts as delivered when it is shown.
   * onProgress(segment, spokenChars) lets a view show how far speech has got.
   */
  class Speaker {
    constructor(report, onProgress) {
      this.report = report;
      this.onProgress = onProgress;
      this.enabled = true;
      this.seg = null;
      this.onBlocked = null;
    }

    get supported() {
      return Boolean(window.speechSynthesis) && typeof window.SpeechSynthesisUtterance === "function";
    }

    setEnabled(on) {
      this.enabled = on;
      const s = this.seg;
      if (!on && s !== null && s.speak) this._mute(s);
    }

    start(segment) {
      if (this.seg !== null) this._cut(this.seg); // a new segment ends the one before
      this.seg = {
        id: segment, text: "", queuedTo: 0, spokenTo: 0, ended: false,
        current: null, queue: [], speak: this.enabled && this.supported, done: false,
      };
    }

    text(segment, delta) {
      const s = this._get(segment);
      if (s === null) return;
      s.text += delta;
      this._split(s, false);
      this._pump(s);
    }

    end(segment) {
      const s = this._get(segment);
      if (s === null) return;
      s.ended = true;
      this._split(s, true);
      this._pump(s);
    }

    clear(segment) {
      const s = this._get(segment);
      if (s !== null) this._cut(s);
    }

    /** The page is closing or the connection dropped: stop speaking, report nothing. */
    reset() {
      const s = this.seg;
      this.seg = null;
      if (s !== null) { s.done = true; s.current = null; }
      if (this.supported) window.speechSynthesis.cancel();
    }

    _get(segment) {
      const s = this.seg;
      return s !== null && s.id === segment && !s.done ? s : null;
    }

    _split(s, final) {
      SENTENCE_END.lastIndex = s.queuedTo;
      let match;
      while ((match = SENTENCE_END.exec(s.text)) !== null) {
        const end = match.index + match[0].length;
        if (end === match.index) { SENTENCE_END.lastIndex++; continue; }
        if (end === s.text.length && !final && !/\s$/.test(match[0])) break; // "3." of "3.5"?
        s.queue.push([s.queuedTo, end]);
        s.queuedTo = end;
      }
      if (final && s.queuedTo < s.text.length) {
        s.queue.push([s.queuedTo, s.text.length]);
        s.queuedTo = s.text.length;
      }
    }

    _pump(s) {
      if (!s.speak) {
        s.queue = [];
        s.spokenTo = s.queuedTo;
        this._progress(s, s.spokenTo);
        this._finishIfDone(s);
        return;
      }
      while (s.current === null && s.queue.length > 0) {
        const [start, end] = s.queue.shift();
        const chunk = s.text.slice(start, end);
        if (!chunk.trim()) { s.spokenTo = end; continue; }
        this._speak(s, start, end, chunk);
      }
      this._finishIfDone(s);
    }

    _speak(s, start, end, chunk) {
      const utterance = new SpeechSynthesisUtterance(chunk);
      // Holding the utterance keeps it alive: Chrome may drop the events of one it collected.
      const cur = { start: start, end: end, progress: 0, utterance: utterance };
      s.current = cur;
      utterance.onboundary = (ev) => {
        if (s.current !== cur || (ev.name && ev.name !== "word")) return;
        cur.progress = Math.max(cur.progress, wordEnd(chunk, ev.charIndex, ev.charLength));
        this._progress(s, cur.start + cur.progress);
      };
      utterance.onend = () => {
        if (s.current !== cur) return; // cancelled by us: already reported
        s.current = null;
        s.spokenTo = cur.end;
        this._progress(s, s.spokenTo);
        this._pump(s);
      };
      utterance.onerror = (ev) => {
        if (s.current !== cur) return;
        // Not ours (blocked autoplay, a broken voice): the text stays shown; go on silently.
        if (ev.error === "not-allowed" && this.onBlocked) this.onBlocked();
        this._mute(s);
      };
      window.speechSynthesis.speak(utterance);
    }

    _mute(s) {
      s.speak = false;
      if (s.current !== null) {
        s.current = null;
        window.speechSynthesis.cancel();
      }
      this._pump(s);
    }

    _finishIfDone(s) {
      if (s.done || !s.ended || s.current !== null || s.queue.length > 0) return;
      if (s.queuedTo < s.text.length) return;
      s.done = true;
      if (this.seg === s) this.seg = null;
      this.report(s.id, s.text, false);
    }

    _cut(s) {
      if (s.done) return;
      s.done = true;
      if (this.seg === s) this.seg = null;
      let spoken = s.spokenTo;
      if (!s.speak) spoken = s.text.length; // shown, not spoken: all of it was delivered
      else if (s.current !== null) spoken = s.current.start + s.current.progress;
      const speaking = s.current !== null;
      s.current = null;
      if (speaking) window.speechSynthesis.cancel();
      this.report(s.id, s.text.slice(0, spoken), true);
    }

    _progress(s, chars) {
      if (this.onProgress) this.onProgress(s.id, chars);
    }
  }

  /** Where the word that starts at charIndex ends (boundary events may omit charLength). */
  function wordEnd(text, charIndex, charLength) {
    if (charLength > 0) return Math.min(text.length, charIndex + charLength);
    const rest = text.slice(charIndex).search(/\s/);
    return rest < 0 ? text.length : charIndex + rest;
  }

  window.BacklineSpeech = {
    Listener: Listener,
    Speaker: Speaker,
    recognitionSupported: Recognition !== null,
    recognitionSupport: recognitionSupport,
    detectVoice: detectVoice,
    watchVoice: watchVoice,
  };
})();
