/* backline web: alerts (protocol message background_alert, docs/web.md). A background
 * finished, failed or asks something: the page plays the alert's short sound at once
 * (Web Audio, the notes the server sends in `tone`, over whatever the agent says) and,
 * when the user allowed notifications (the "Notify me" button), shows a browser
 * notification. window.backlineAlerts lists what each alert did (for tests). */
"use strict";

(function () {
  const LOUDNESS = 0.2; // of full scale: under the agent's voice, so it does not startle
  const FADE = 0.008; // seconds of fade in and out of each note: no click

  class Alerts {
    constructor() {
      this.context = null; // made at the first sound or the first click (autoplay rules)
      this.heard = []; // {background_id, kind, text, sound, notified}, in order
      const unlock = () => this.unlock();
      window.addEventListener("pointerdown", unlock, true);
      window.addEventListener("keydown", unlock, true);
    }

    audio() {
      const Context = window.AudioContext || window.webkitAudioContext;
      if (!Context) return null;
      if (this.context === null) this.context = new Context();
      return this.context;
    }

    /** A click or a key lets the page make sound (browsers block it before). */
    unlock() {
      const context = this.audio();
      if (context !== null && context.state === "suspended") context.resume().catch(() => {});
    }

    /** Plays `tone` ([[hertz, seconds], ...]; 0 Hz is a pause) now; true if it is heard
     * (false while the browser blocks sound: nobody clicked the page yet). */
    play(tone) {
      const context = this.audio();
      if (context === null || !Array.isArray(tone)) return false;
      if (context.state === "suspended") context.resume().catch(() => {});
      let at = context.currentTime + 0.01;
      for (const [frequency, seconds] of tone) {
        if (frequency > 0 && seconds > 2 * FADE) {
          const oscillator = context.createOscillator();
          const gain = context.createGain();
          oscillator.frequency.value = frequency;
          gain.gain.setValueAtTime(0, at);
          gain.gain.linearRampToValueAtTime(LOUDNESS, at + FADE);
          gain.gain.setValueAtTime(LOUDNESS, at + seconds - FADE);
          gain.gain.linearRampToValueAtTime(0, at + seconds);
          oscillator.connect(gain).connect(context.destination);
          oscillator.start(at);
          oscillator.stop(at + seconds);
        }
        at += seconds;
      }
      return context.state === "running";
    }

    /** A browser notification, if the user allowed them; true if one was shown. */
    notify(m) {
      if (!("Notification" in window) || Notification.permission !== "granted") return false;
      try {
        // One per background: a newer alert replaces its older one.
        const shown = new Notification("backline: " + m.background_id, {
          body: m.text, tag: "backline-" + m.background_id, renotify: true,
        });
        shown.onclick = () => { window.focus(); shown.close(); };
        return true;
      } catch (e) {
        return false; // (a browser that shows them only from a service worker)
      }
    }

    alert(m) {
      const record = {
        background_id: m.background_id, kind: m.kind, text: m.text,
        sound: this.play(m.tone), notified: this.notify(m),
      };
      this.heard.push(record);
      return record;
    }
  }

  /** The "Notify me" button: asks the browser (a click is needed), then says how it is. */
  function notificationButton(button) {
    if (!("Notification" in window)) return; // stays hidden
    const show = () => {
      const permission = Notification.permission;
      button.hidden = false;
      button.disabled = permission !== "default";
      button.dataset.permission = permission;
      button.textContent = permission === "granted" ? "🔔 Notifications on"
        : permission === "denied" ? "🔕 Notifications blocked" : "🔔 Notify me";
      button.title = permission === "denied"
        ? "The browser blocks notifications from this page: allow them in the site's settings"
        : "A notification when a background finishes, fails or asks you something";
    };
    button.addEventListener("click", () => {
      Notification.requestPermission().then(show, show);
    });
    show();
  }

  window.BacklineAlerts = { Alerts: Alerts, notificationButton: notificationButton };
})();
