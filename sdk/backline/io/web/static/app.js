/* backline web: the page. Speaks protocol backline.v1 (docs/web.md) over one WebSocket.
 * Speech is the browser's (speech.js) or the server's (voice.js), as hello says. */
"use strict";

(function () {
  const SUBPROTOCOL = "backline.v1";
  const PROTOCOL = 1;
  const $ = (id) => document.getElementById(id);
  // Opened with ?token= or a one-time ?code=: the server set a cookie, so take the secret
  // out of the address bar (and the history). The token, if given, also goes on the socket.
  const token = new URLSearchParams(location.search).get("token") || "";
  if (location.search) history.replaceState(null, "", location.pathname);
  const transcript = $("transcript");
  const live = new Map(); // segment → {li, text, source, backgroundId}
  const cards = new Map(); // background id → card element
  const MAX_BUFFERED = 256 * 1024; // bytes waiting on the socket: past it, microphone audio is dropped
  let ws = null;
  let speech = null; // hello's speech: who listens and speaks in this tab

  // -- helpers ---------------------------------------------------------------------------------
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function send(message) {
    if (ws !== null && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
  }

  function sendAudio(buffer) {
    if (ws !== null && ws.readyState === WebSocket.OPEN && ws.bufferedAmount < MAX_BUFFERED) ws.send(buffer);
  }

  function byServer() { return speech !== null && speech.by === "server"; }

  function notify(text, sticky) {
    const box = $("notice");
    const p = el("p", sticky ? "sticky" : "transient", text);
    box.appendChild(p);
    box.hidden = false;
    if (!sticky) {
      setTimeout(() => {
        p.remove();
        box.hidden = box.childElementCount === 0;
      }, 8000);
    }
  }

  function setBadge(id, label, value) {
    const badge = $(id);
    badge.dataset.state = value;
    badge.replaceChildren(document.createTextNode(label + ": "), el("b", null, value));
  }

  function scrollDown() {
    const box = transcript.parentElement;
    box.scrollTop = box.scrollHeight;
    transcript.lastElementChild?.scrollIntoView({ block: "end" });
  }

  function agentLabel(source, backgroundId) {
    if (source === "background_reply") return "agent · update from " + (backgroundId || "background");
    if (source === "tool_reply") return "agent · tool update";
    return "agent";
  }

  function entry(kind, label, text) {
    const li = el("li", "entry " + kind);
    li.appendChild(el("span", "who", label));
    const body = el("span", "text", text);
    li.appendChild(body);
    transcript.appendChild(li);
    scrollDown();
    return li;
  }

  // -- alerts (alerts.js): a sound at once, a notification if allowed, a line ---------------------
  const alerts = new window.BacklineAlerts.Alerts();
  window.backlineAlerts = alerts.heard;
  window.BacklineAlerts.notificationButton($("notify"));

  // -- speech ----------------------------------------------------------------------------------
  const speaker = new window.BacklineSpeech.Speaker(onPlayout, onProgress);
  speaker.onBlocked = () => notify("The browser blocked speech until you click the page: click anywhere, and replies will be spoken.", false);

  function showInterim(text) {
    $("interim").textContent = text;
    $("interim").hidden = !text;
  }

  const listening = {
    onSpeechStart: () => send({ type: "user_started_speaking" }),
    onSpeechEnd: () => send({ type: "user_stopped_speaking" }),
    onFinal: (text) => send({ type: "user_turn", text: text }),
    onInterim: showInterim,
    onMode: (mode) => {
      const mic = $("mic");
      mic.setAttribute("aria-pressed", String(mode === "handsfree"));
      mic.querySelector(".label").textContent =
        mode === "handsfree" ? "Listening… (click to stop)" : "Start talking";
      $("ptt").classList.toggle("held", mode === "ptt");
    },
    onError: (message) => notify(message, false),
  };
  const browserListener = new window.BacklineSpeech.Listener(listening);
  const serverListener = new window.BacklineServerSpeech.ServerListener(listening, send, sendAudio);
  let listener = browserListener; // the server's once hello says it listens

  const player = new window.BacklineServerSpeech.ServerPlayer((stream, seconds, done) =>
    send({ type: "audio_played", stream: stream, seconds: seconds, done: done }));
  player.onBlocked = () => notify("The browser blocked sound until you click the page: click anywhere, and replies will be heard.", false);

  function onPlayout(segment, text, interrupted) {
    send({ type: "playout", segment: segment, text: text, interrupted: interrupted });
    const seg = live.get(segment);
    if (seg === undefined) return;
    seg.li.classList.add("played");
    if (interrupted) showCut(seg, text.length);
  }

  function onProgress(segment, chars) {
    const seg = live.get(segment);
    if (seg === undefined) return;
    const body = seg.li.querySelector(".text");
    body.replaceChildren(
      el("span", "spoken", seg.text.slice(0, chars)),
      el("span", "unspoken", seg.text.slice(chars)),
    );
  }

  function showCut(seg, chars) {
    const body = seg.li.querySelector(".text");
    body.replaceChildren(el("span", "spoken", seg.text.slice(0, chars)), el("s", "cut", seg.text.slice(chars)));
  }

  // -- server messages -------------------------------------------------------------------------
  const handlers = {
    hello(m) {
      if (m.protocol !== PROTOCOL) notify("This server speaks protocol " + m.protocol + "; this page speaks " + PROTOCOL + ". Reload the page.", true);
      useSpeech(m.speech || null);
      setBadge("agent-state", "agent", m.agent_state);
      setBadge("user-state", "you", m.user_state);
      $("backgrounds").replaceChildren();
      if (m.backgrounds.length === 0) $("backgrounds").appendChild(el("p", "empty", "No background sessions."));
      for (const b of m.backgrounds) {
        card(b.id, b.description);
        setStatus(b.id, b.status, null);
        if (b.state !== null) renderState(b.id, b.state);
      }
    },
    agent_state(m) { setBadge("agent-state", "agent", m.state); },
    user_state(m) { setBadge("user-state", "you", m.state); },
    segment_start(m) {
      const li = entry("agent live", agentLabel(m.source, m.background_id), "");
      if (m.source === "background_reply" || m.source === "tool_reply") li.classList.add("update");
      li.dataset.segment = String(m.segment);
      live.set(m.segment, { li: li, text: "", source: m.source });
      if (m.speaker !== "server") speaker.start(m.segment); // else the server's voice plays it
    },
    segment_text(m) {
      const seg = live.get(m.segment);
      if (seg !== undefined) {
        seg.text += m.text;
        seg.li.querySelector(".text").appendChild(el("span", "unspoken", m.text));
        scrollDown();
      }
      speaker.text(m.segment, m.text);
    },
    segment_end(m) { speaker.end(m.segment); },
    segment_clear(m) { speaker.clear(m.segment); },
    audio_start(m) { player.start(m.stream, m.sample_rate); },
    audio_end(m) { player.end(m.stream); },
    audio_clear(m) { player.clear(m.stream); },
    interim_transcript(m) { showInterim(m.text); },
    transcript(m) { addTranscript(m); },
    background_state(m) { renderState(m.background_id, m.state); },
    background_status(m) { setStatus(m.background_id, m.status, m.error); },
    background_alert(m) {
      alerts.alert(m);
      entry("alert " + m.kind, "🔔", m.text);
    },
    error(m) { notify((m.source ? m.source + ": " : "") + m.message, !m.recoverable); },
    closed(m) { notify("The conversation ended (" + m.reason + "). Reload the page to start a new one.", true); },
  };

  function addTranscript(m) {
    if (m.kind === "agent") {
      const seg = m.segment !== null && m.segment !== undefined ? live.get(m.segment) : undefined;
      let li;
      if (seg !== undefined) {
        li = seg.li;
        live.delete(m.segment);
        li.querySelector(".text").replaceChildren(document.createTextNode(m.text));
      } else {
        li = entry("agent", agentLabel(m.source, m.background_id), m.text);
      }
      li.classList.remove("live");
      li.classList.add("final");
      li.dataset.itemId = m.id;
      if (m.source === "background_reply" || m.source === "tool_reply") li.classList.add("update");
      if (m.interrupted) {
        li.classList.add("interrupted");
        li.appendChild(el("span", "mark", "interrupted"));
      }
      return;
    }
    let li;
    if (m.kind === "user") {
      li = entry("user", "you", m.text);
      if (byServer()) showInterim("");
    }
    else if (m.kind === "background") {
      li = m.silent
        ? entry("background note", m.background_id + " · context note (not spoken)", m.text)
        : entry("background", m.background_id + " → agent", m.text);
    } else if (m.kind === "tool") li = entry("tool", "tool", m.text);
    else if (m.kind === "handoff") li = entry("handoff", "handoff", m.text);
    else return;
    li.dataset.itemId = m.id;
  }

  // -- background cards ------------------------------------------------------------------------
  function card(id, description) {
    let c = cards.get(id);
    if (c !== undefined) return c;
    $("backgrounds").querySelector(".empty")?.remove();
    c = el("article", "card");
    c.dataset.background = id;
    const head = el("header");
    head.append(el("h3", null, id), el("span", "status", "starting"));
    c.append(head, el("p", "description", description || ""), el("div", "state-body", "No state reported yet."));
    $("backgrounds").appendChild(c);
    cards.set(id, c);
    return c;
  }

  function setStatus(id, status, error) {
    const c = card(id, "");
    const pill = c.querySelector(".status");
    pill.textContent = status;
    pill.dataset.status = status;
    c.querySelector(".card-error")?.remove();
    if (error) c.appendChild(el("p", "card-error", error));
  }

  const KNOWN_KEYS = ["status", "phase", "task", "error", "recent_activity", "files_changed", "last_task", "links"];

  function renderState(id, state) {
    const box = card(id, "").querySelector(".state-body");
    box.replaceChildren();
    if (state === null || state === undefined) {
      box.textContent = "null";
    } else if (Array.isArray(state)) {
      box.appendChild(list(state));
    } else if (typeof state !== "object") {
      box.appendChild(el("p", "value", state));
    } else {
      if (state.status || state.phase) box.appendChild(el("p", "state-status", state.status || state.phase));
      if (state.task) box.appendChild(field("task", state.task));
      if (state.error) box.appendChild(el("p", "state-error", state.error));
      if (Array.isArray(state.recent_activity) && state.recent_activity.length) {
        box.append(el("h4", null, "Recent activity"), list(state.recent_activity, "recent-activity"));
      }
      if (Array.isArray(state.files_changed) && state.files_changed.length) {
        box.append(el("h4", null, "Files changed"), list(state.files_changed, "files-changed", "code"));
      }
      if (state.last_task) box.appendChild(field("last task", state.last_task));
      for (const [key, value] of Object.entries(state)) {
        if (KNOWN_KEYS.includes(key) || value === null || value === "") continue;
        box.appendChild(field(key.replaceAll("_", " "), value));
      }
      if (state.links && typeof state.links === "object") box.appendChild(links(state.links));
    }
  }

  // State convention: "links" maps a label to a URL or an absolute file path.
  function links(map) {
    const p = el("p", "links");
    for (const [label, target] of Object.entries(map)) {
      if (typeof target !== "string" || !target) continue;
      const href = /^https?:\/\//.test(target) ? target : target.startsWith("/") ? "file://" + encodeURI(target) : null;
      const a = el("a", null, label);
      if (href) { a.href = href; a.target = "_blank"; a.rel = "noopener"; }
      a.title = target;
      p.append(a, el("code", "link-target", " " + target));
    }
    return p;
  }

  function field(label, value) {
    const p = el("p", "field");
    const text = typeof value === "object" ? JSON.stringify(value) : String(value);
    p.append(el("span", "label", label + ": "), el("span", "value", text));
    return p;
  }

  function list(items, className, itemTag) {
    const ul = el("ul", className || null);
    for (const item of items) {
      const li = el("li");
      const text = typeof item === "object" ? JSON.stringify(item) : String(item);
      li.appendChild(itemTag ? el(itemTag, null, text) : document.createTextNode(text));
      ul.appendChild(li);
    }
    return ul;
  }

  // -- connection ------------------------------------------------------------------------------
  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = token ? "?token=" + encodeURIComponent(token) : "";
    // The server listens where the browser cannot (--speech auto): say which this is.
    const prefer = window.BacklineSpeech.recognitionSupport() === "present" ? "browser" : "server";
    const params = (query ? query + "&" : "?") + "speech=" + prefer;
    ws = new WebSocket(scheme + "//" + location.host + "/ws" + params, [SUBPROTOCOL]);
    ws.binaryType = "arraybuffer";
    ws.onopen = () => setBadge("connection", "server", "connected");
    ws.onmessage = (ev) => {
      if (typeof ev.data !== "string") { player.data(ev.data); return; } // the server's voice
      let message;
      try { message = JSON.parse(ev.data); } catch (e) { return; }
      const handle = handlers[message.type];
      if (handle) handle(message);
    };
    ws.onclose = (ev) => {
      speaker.reset();
      player.reset();
      listener.stop();
      setBadge("connection", "server", "disconnected");
      notify("Disconnected from the server" + (ev.reason ? " (" + ev.reason + ")" : "") + ". Reload the page to start a new conversation.", true);
    };
  }

  // -- what works here ---------------------------------------------------------------------------
  // Voice is offered only once the page knows it can work here. Each way in is tried in order:
  // the first with no problem is offered; else the page says why none works (typing always
  // does). The server's own speech recognition, when the server offers it, is one more entry.
  const VOICE_INPUTS = [
    {
      name: "browser",
      when: () => !byServer(),
      problem(caps) {
        if (caps.recognition === "absent") {
          return "This browser has no speech recognition, so you cannot talk to the agent here: type your messages below. Google Chrome, Edge and Safari recognise speech (with a network connection); Firefox does not.";
        }
        if (caps.recognition === "no-service") {
          return "This browser has no speech recognition service (Chromium builds, Brave and Opera have the interface without Google's service behind it), so you cannot talk to the agent here: type your messages below, or open this page in Google Chrome, Edge or Safari.";
        }
        return microphoneProblem(caps.microphone);
      },
      works: "You can talk (Start talking, or hold Space) or type. The browser's speech recognition sends your audio to its vendor.",
    },
    {
      name: "server",
      when: byServer,
      problem(caps) {
        const problem = window.BacklineServerSpeech.captureProblem();
        if (problem === "no-worklet") {
          return "This browser cannot stream the microphone to the server (it has no Web Audio worklets): type your messages below, or use a current Chrome, Edge, Firefox or Safari.";
        }
        return microphoneProblem(problem === "insecure" ? "insecure" : caps.microphone);
      },
      works() {
        const engines = speech.engines || {};
        const where = speech.local
          ? " on the machine it runs on: your audio goes nowhere else."
          : ": the server sends your audio to that engine's service.";
        return "You can talk (Start talking, or hold Space) or type. backline listens with " +
          engines.stt + " and speaks with " + engines.tts + where;
      },
    },
  ];

  /** What the page can say when the browser cannot listen and the server does not either. */
  function serverHint(caps) {
    if (speech === null || byServer() || caps.recognition === "present") return "";
    if (speech.mode === "browser") return " (backline web --speech auto lets the server listen where the browser cannot.)";
    if (speech.unavailable) return " The server has no speech engine ready either (backline speech list).";
    return "";
  }

  function microphoneProblem(state) {
    switch (state) {
      case "insecure":
        return "The browser gives this page no microphone: it is served over plain http from another machine. Type your messages below, or serve it over https (docs/web.md).";
      case "blocked":
        return "The microphone is blocked for this page: allow it in the browser's site settings (the page notices), or type your messages below.";
      case "none":
        return "No microphone was found: connect one (the page notices), or type your messages below.";
      default:
        return null;
    }
  }

  let voiceInput = null; // the way in on offer, or null: type

  async function offerVoice() {
    const caps = await window.BacklineSpeech.detectVoice();
    const problems = [];
    let chosen = null;
    for (const input of VOICE_INPUTS) {
      if (!input.when()) continue;
      const problem = input.problem(caps);
      if (problem === null) { chosen = input; break; }
      problems.push(problem);
    }
    voiceInput = chosen;
    if (chosen === null && listener.mode !== "off") listener.stop();
    $("mic").hidden = chosen === null;
    $("ptt").hidden = chosen === null;
    const status = $("voice-status");
    status.dataset.voice = chosen === null ? "none" : chosen.name;
    status.textContent = chosen === null
      ? (problems[0] || "") + serverHint(caps)
      : typeof chosen.works === "function" ? chosen.works() : chosen.works;
  }

  /** hello's speech: the server's listener (and voice) or the browser's. */
  function useSpeech(info) {
    speech = info;
    const next = byServer() ? serverListener : browserListener;
    if (next !== listener) {
      listener.stop();
      listener = next;
    }
    if (!byServer() && !speaker.supported) {
      notify("This browser cannot speak (no speechSynthesis): replies are shown, not spoken.", true);
      $("speak").checked = false;
      $("speak").disabled = true;
    }
    offerVoice();
  }

  // -- controls --------------------------------------------------------------------------------
  function setUp() {
    offerVoice();
    window.BacklineSpeech.watchVoice(() => offerVoice());
    if (speaker.supported) window.speechSynthesis.cancel(); // a queue left over from a reload
    for (const name of ["pointerdown", "keydown"]) { // browsers play sound after a gesture
      document.addEventListener(name, () => { if (byServer()) window.BacklineServerSpeech.unlockAudio(); }, true);
    }
    $("mic").addEventListener("click", () => {
      if (listener.mode === "handsfree") listener.stop();
      else listener.startHandsFree();
    });
    const ptt = $("ptt");
    ptt.addEventListener("pointerdown", (ev) => { ev.preventDefault(); listener.pttDown(); });
    for (const name of ["pointerup", "pointerleave", "pointercancel"]) {
      ptt.addEventListener(name, () => listener.pttUp());
    }
    document.addEventListener("keydown", (ev) => {
      if (ev.code === "Space" && !ev.repeat && !isTyping(ev.target) && voiceInput !== null) {
        ev.preventDefault();
        listener.pttDown();
      }
    });
    document.addEventListener("keyup", (ev) => {
      if (ev.code === "Space" && !isTyping(ev.target) && voiceInput !== null) {
        ev.preventDefault(); // not also a click on the focused button
        listener.pttUp();
      }
    });
    $("speak").addEventListener("change", (ev) => {
      speaker.setEnabled(ev.target.checked);
      player.setMuted(!ev.target.checked);
    });
    $("stop").addEventListener("click", () => send({ type: "interrupt" }));
    $("text-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const input = $("text");
      const text = input.value.trim();
      if (!text) return;
      send({ type: "user_turn", text: text });
      input.value = "";
    });
    window.addEventListener("pagehide", () => {
      speaker.reset();
      player.reset();
      listener.stop();
    });
  }

  function isTyping(target) {
    return target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement ||
      (target instanceof HTMLElement && target.isContentEditable);
  }

  setUp();
  connect();
})();
