/* Test double for the browser's speech: an init script that replaces SpeechRecognition
 * and speechSynthesis before the page loads. Configure with window.__fakeSpeechConfig
 * (set by an earlier init script): {wordMs, recognition, synthesis}.
 *
 * window.__fake:
 *   userSpeaks(text)      speech start, interim results word by word, then the final result
 *   startSpeaking(words)  speech start and interim results only (a barge-in in progress)
 *   finishSpeaking(text)  the final result of what startSpeaking began
 *   recognitionFails(code) an error event with that code ("network", ...), then the end
 *   utterances            what synthesis was asked to say: {text, words, ended, cut}
 *   spokenWords()         every word synthesis has started to speak, in order
 *   config                the configuration in force (change wordMs to pace later speech)
 *   holdSpeech            while true, synthesis speaks no further word (a paused voice)
 *   plugMicrophone()      with {microphone: false}: a microphone is connected now
 */
(() => {
  "use strict";
  const cfg = Object.assign({ wordMs: 20, recognition: true, synthesis: true, microphone: true },
    window.__fakeSpeechConfig || {});
  const fake = { recognitions: [], active: null, utterances: [], log: [], config: cfg };
  window.__fake = fake;

  // -- recognition ---------------------------------------------------------------------------
  class FakeRecognition extends EventTarget {
    constructor() {
      super();
      this.continuous = false;
      this.interimResults = false;
      this.lang = "";
      this.running = false;
      this.results = [];
      fake.recognitions.push(this);
    }
    start() {
      if (this.running) throw new DOMException("already started", "InvalidStateError");
      this.running = true;
      fake.active = this;
      fake.log.push("recognition start");
      setTimeout(() => this._fire("start"), 0);
    }
    stop() { this._finish(); }
    abort() { this._finish(); }
    _finish() {
      if (!this.running) return;
      this.running = false;
      if (fake.active === this) fake.active = null;
      fake.log.push("recognition end");
      setTimeout(() => this._fire("end"), 0);
    }
    _fire(type, props) {
      const ev = new Event(type);
      Object.assign(ev, props || {});
      const handler = this["on" + type];
      if (typeof handler === "function") handler.call(this, ev);
      this.dispatchEvent(ev);
    }
    _result(text, isFinal) {
      const alt = { transcript: text, confidence: 0.9 };
      const result = Object.assign([alt], { isFinal: isFinal });
      const last = this.results.length - 1;
      const index = last >= 0 && !this.results[last].isFinal ? last : last + 1;
      this.results[index] = result;
      this._fire("result", { resultIndex: index, results: this.results });
    }
  }

  function recognizer() {
    const rec = fake.active;
    if (rec === null || !rec.running) throw new Error("no speech recognition is running");
    return rec;
  }

  fake.startSpeaking = (text) => {
    const rec = recognizer();
    rec._fire("speechstart");
    const words = text.split(/\s+/).filter(Boolean);
    for (let i = 1; i <= words.length; i++) rec._result(words.slice(0, i).join(" "), false);
  };
  fake.finishSpeaking = (text) => {
    const rec = recognizer();
    rec._result(text, true);
    rec._fire("speechend");
  };
  fake.userSpeaks = (text) => {
    fake.startSpeaking(text);
    fake.finishSpeaking(text);
  };
  fake.recognitionFails = (code) => {  // what the browser does: an error event, then end
    const rec = recognizer();
    rec._fire("error", { error: code });
    rec._finish();
  };

  if (cfg.recognition) {
    window.SpeechRecognition = FakeRecognition;
    window.webkitSpeechRecognition = FakeRecognition;
  } else {
    delete window.SpeechRecognition;
    delete window.webkitSpeechRecognition;
  }

  // -- the microphone: Chromium's fake device, or none until plugMicrophone() ------------------
  if (!cfg.microphone && navigator.mediaDevices) {
    const devices = navigator.mediaDevices;
    const real = devices.enumerateDevices.bind(devices);
    let plugged = false;
    devices.enumerateDevices = async () =>
      (await real()).filter((d) => plugged || d.kind !== "audioinput");
    fake.plugMicrophone = () => {
      plugged = true;
      devices.dispatchEvent(new Event("devicechange"));
    };
  }

  // -- synthesis -----------------------------------------------------------------------------
  function fire(utterance, type, props) {
    const init = Object.assign({ utterance: utterance, charIndex: 0, elapsedTime: 0 }, props || {});
    const ev = type === "error"
      ? new SpeechSynthesisErrorEvent("error", init)
      : new SpeechSynthesisEvent(type, init);
    utterance.dispatchEvent(ev);
  }

  const synth = {
    speaking: false, pending: false, paused: false, onvoiceschanged: null,
    queue: [], current: null,
    speak(utterance) {
      this.queue.push(utterance);
      this.pending = this.queue.length > 0;
      this._next();
    },
    cancel() {
      const cur = this.current;
      const queued = this.queue;
      this.queue = [];
      this.current = null;
      this.speaking = false;
      this.pending = false;
      if (cur !== null) {
        clearTimeout(cur.timer);
        cur.log.cut = true;
        fire(cur.utterance, "error", { error: "interrupted" });
      }
      for (const u of queued) fire(u, "error", { error: "canceled" });
    },
    pause() {}, resume() {},
    getVoices() { return []; },
    addEventListener() {}, removeEventListener() {},
    _next() {
      if (this.current !== null || this.queue.length === 0) return;
      const utterance = this.queue.shift();
      this.pending = this.queue.length > 0;
      const log = { text: utterance.text, words: [], ended: false, cut: false };
      fake.utterances.push(log);
      const words = [...utterance.text.matchAll(/\S+/g)];
      const cur = { utterance: utterance, log: log, i: 0, timer: 0 };
      this.current = cur;
      this.speaking = true;
      const step = () => {
        if (this.current !== cur) return;
        if (fake.holdSpeech) { cur.timer = setTimeout(step, cfg.wordMs); return; }
        if (cur.i < words.length) {
          const m = words[cur.i++];
          log.words.push(m[0]);
          fire(utterance, "boundary", { charIndex: m.index, charLength: m[0].length, name: "word" });
          cur.timer = setTimeout(step, cfg.wordMs);
        } else {
          log.ended = true;
          this.current = null;
          this.speaking = false;
          fire(utterance, "end");
          this._next();
        }
      };
      fire(utterance, "start");
      cur.timer = setTimeout(step, 0);
    },
  };
  fake.synth = synth;
  fake.spokenWords = () => fake.utterances.flatMap((u) => u.words);

  if (cfg.synthesis) {
    Object.defineProperty(window, "speechSynthesis", { value: synth, configurable: true, writable: true });
  } else {
    delete window.speechSynthesis;
    Object.defineProperty(window, "speechSynthesis", { value: undefined, configurable: true });
  }
})();
