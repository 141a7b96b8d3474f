/*
 * Faultline web-vitals collector (plain browser JavaScript, no build step).
 *
 * Served by the Faultline host at GET {endpoint}/collector.js. Usage:
 *
 *   <script src="https://faultline.example/collector.js"></script>
 *   <script>
 *     Faultline.init({apiKey: 'KEY', endpoint: 'https://faultline.example'});
 *   </script>
 *
 * Faultline.init({apiKey, endpoint, serviceWorker})
 *   apiKey         string, required.
 *   endpoint       the host's base URL (a trailing slash is stripped).
 *   serviceWorker  optional same-origin worker script URL to register.
 *   Returns a Promise that resolves (never rejects) once the experiment
 *   context has been fetched (or failed). A second call does nothing and
 *   returns the same Promise. A call without apiKey or endpoint only warns
 *   (and does not count as the first call).
 *
 * Context: GET {endpoint}/collector/context?page=<encoded location.href>
 *   with header x-api-key. Answer {"experiment", "phase", "site", "mode"};
 *   experiment and phase tag every metric sent from this page load. Fetched
 *   again when the page is restored from the back/forward cache.
 *
 * Metrics (the GoogleChrome/web-vitals v5 algorithms, re-implemented):
 *   LCP  latest largest-contentful-paint startTime - activationStart (>= 0),
 *        of entries that start before the page was first hidden; final on
 *        the first trusted keydown/click/pointerdown or when hidden.
 *   CLS  largest session window (gap < 1 s, window < 5 s) of layout shifts
 *        without recent input, over the page's whole life (hidden or not);
 *        reported once the page had its first contentful paint before it
 *        was first hidden (as web-vitals does).
 *   INP  event (durationThreshold 40) + first-input entries grouped by
 *        interactionId (max duration each), 10 longest kept, over the page's
 *        whole life; value = entry[min(len-1, floor(interactions/50))], where
 *        interactions is performance.interactionCount or, without it,
 *        web-vitals' estimate from the interactionIds of all event entries
 *        ((max - min) / 7 + 1); only after an interaction.
 *   Back/forward-cache restore (pageshow, persisted): new metric ids
 *   (navigation_type "back-forward-cache"); LCP is the time from the
 *   restore to the second animation frame after it (final), CLS starts
 *   again at 0, INP counts only the interactions after the restore.
 *
 * Beacon: navigator.sendBeacon({endpoint}/collector/vitals, JSON string)
 *   (text/plain, no CORS preflight), falling back to fetch keepalive.
 *   Body {"apiKey", "experiment", "phase", "page", "metrics": [{"name",
 *   "value", "rating", "id", "navigation_type"}]}, at most 20 metrics per
 *   beacon. Sent on visibilitychange to hidden and on pagehide; a metric is
 *   sent again only when its value changed since the last send. Nothing is
 *   sent while the page is in no experiment (experiment null, or the
 *   context not fetched yet); the metrics are still measured.
 *
 * Faultline.flush()   sends changed metrics now; true if a beacon was queued
 *                     (false too when the page is in no experiment).
 * Faultline.vitals()  {LCP: {value, rating} | null, CLS: ..., INP: ...}.
 *
 * Nothing here throws into the page; without PerformanceObserver the
 * collector measures nothing.
 */
(function (global) {
  'use strict';

  if (!global || (global.Faultline && global.Faultline.__faultlineCollector)) {
    return;
  }

  var MAX_METRICS_PER_BEACON = 20;
  var MAX_INTERACTIONS = 10;
  var THRESHOLDS = {
    LCP: [2500, 4000],
    CLS: [0.1, 0.25],
    INP: [200, 500]
  };

  var config = null; // {apiKey, endpoint}
  var context = {experiment: null, phase: null};
  var contextSeq = 0; // the latest context request; older answers are ignored
  var initPromise = null;
  var started = false;

  var firstHiddenTime = Infinity;
  var activationStart = 0;
  var navigationType = 'navigate';

  var metrics = {}; // name -> metric record
  var observers = []; // {po, handle}
  var restoreHandlers = []; // called on a back/forward-cache restore

  function warn() {
    try {
      if (global.console && global.console.warn) {
        global.console.warn.apply(global.console, arguments);
      }
    } catch (e) {
      /* ignore */
    }
  }

  function safe(fn) {
    return function () {
      try {
        return fn.apply(this, arguments);
      } catch (e) {
        warn('Faultline collector:', e);
      }
    };
  }

  function now() {
    return Date.now();
  }

  function uniqueId() {
    return 'v5-' + now() + '-' + (Math.floor(Math.random() * (9e12 - 1)) + 1e12);
  }

  function rating(name, value) {
    var t = THRESHOLDS[name];
    if (value > t[1]) return 'poor';
    if (value > t[0]) return 'needs-improvement';
    return 'good';
  }

  function getNavigationEntry() {
    try {
      var perf = global.performance;
      var entry = perf && perf.getEntriesByType && perf.getEntriesByType('navigation')[0];
      // As web-vitals does: ignore an entry whose timings are not plausible.
      if (entry && entry.responseStart > 0 && entry.responseStart < perf.now()) {
        return entry;
      }
    } catch (e) {
      /* ignore */
    }
    return null;
  }

  function computeNavigation() {
    var nav = getNavigationEntry();
    activationStart = (nav && nav.activationStart) || 0;
    navigationType = 'navigate';
    if (nav) {
      if (global.document.prerendering || activationStart > 0) {
        navigationType = 'prerender';
      } else if (global.document.wasDiscarded) {
        navigationType = 'restore';
      } else if (nav.type) {
        navigationType = String(nav.type).replace(/_/g, '-');
      }
    }
  }

  // ---- visibility: the time the page was first hidden ------------------

  function initVisibility() {
    var doc = global.document;
    var hiddenAt;
    try {
      if (!doc.prerendering && global.performance.getEntriesByType) {
        var vis = global.performance.getEntriesByType('visibility-state');
        for (var i = 0; i < vis.length; i++) {
          if (vis[i].name === 'hidden' && vis[i].startTime > activationStart) {
            hiddenAt = vis[i].startTime;
            break;
          }
        }
      }
    } catch (e) {
      /* ignore */
    }
    if (typeof hiddenAt === 'number') {
      firstHiddenTime = hiddenAt;
    } else {
      firstHiddenTime = doc.visibilityState === 'hidden' && !doc.prerendering ? 0 : Infinity;
    }
    var onChange = function (event) {
      if (doc.visibilityState === 'hidden' && firstHiddenTime === Infinity) {
        firstHiddenTime = event.type === 'visibilitychange' ? event.timeStamp : 0;
      }
    };
    // Registered before the flush listeners, so it runs first.
    global.addEventListener('visibilitychange', safe(onChange), true);
    global.addEventListener('prerenderingchange', safe(onChange), true);
  }

  function beforeHidden(entry) {
    return entry.startTime < firstHiddenTime;
  }

  // As web-vitals: after a back/forward-cache restore, in a task of its own
  // (the visibility state may still be changing), the page counts as never
  // hidden unless it is hidden now.
  function resetHiddenTime() {
    var doc = global.document;
    firstHiddenTime = doc.visibilityState === 'hidden' && !doc.prerendering ? 0 : Infinity;
  }

  function doubleRAF(cb) {
    if (typeof global.requestAnimationFrame !== 'function') {
      global.setTimeout(cb, 0);
      return;
    }
    global.requestAnimationFrame(
      safe(function () {
        global.requestAnimationFrame(cb);
      })
    );
  }

  // ---- metric records --------------------------------------------------

  function newMetric(name) {
    var m = {
      name: name,
      value: 0,
      hasValue: false,
      id: uniqueId(),
      navigation_type: navigationType,
      lastSent: null
    };
    metrics[name] = m;
    return m;
  }

  function setValue(m, value) {
    m.value = value;
    m.hasValue = true;
  }

  function supports(type) {
    try {
      var types = global.PerformanceObserver.supportedEntryTypes;
      return !types || types.indexOf(type) >= 0;
    } catch (e) {
      return false;
    }
  }

  // Observes the given types (buffered) with one observer; the handler gets
  // a list of entries. Returns the observer or null.
  function observe(types, handle, extra) {
    var list = [];
    for (var i = 0; i < types.length; i++) {
      if (supports(types[i])) list.push(types[i]);
    }
    if (!list.length) return null;
    try {
      var po = new global.PerformanceObserver(
        safe(function (entryList) {
          handle(entryList.getEntries());
        })
      );
      for (var j = 0; j < list.length; j++) {
        var opts = {type: list[j], buffered: true};
        if (extra) {
          for (var k in extra) {
            if (Object.prototype.hasOwnProperty.call(extra, k)) opts[k] = extra[k];
          }
        }
        po.observe(opts);
      }
      var rec = {po: po, handle: handle, active: true};
      observers.push(rec);
      return rec;
    } catch (e) {
      return null;
    }
  }

  // Hands every pending (not yet delivered) entry to its handler; each
  // handler runs, with no entries if none are pending, so that a value that
  // depends on more than its entries (INP on the interaction count) is
  // brought up to date, as web-vitals does when the page is hidden.
  function takeAllRecords() {
    for (var i = 0; i < observers.length; i++) {
      var rec = observers[i];
      if (!rec.active) continue;
      try {
        rec.handle(rec.po.takeRecords() || []);
      } catch (e) {
        /* ignore */
      }
    }
  }

  // ---- LCP -------------------------------------------------------------

  function startLCP() {
    var m = newMetric('LCP');
    var finalized = false;
    var rec = null;
    var inputTypes = ['keydown', 'click', 'pointerdown'];

    function handle(entries) {
      if (finalized || !entries.length) return;
      var last = entries[entries.length - 1];
      if (last && beforeHidden(last)) {
        setValue(m, Math.max(last.startTime - activationStart, 0));
      }
    }

    function finalize() {
      if (finalized) return;
      removeInput();
      if (rec) {
        try {
          handle(rec.po.takeRecords());
          rec.po.disconnect();
        } catch (e) {
          /* ignore */
        }
        rec.active = false;
      }
      finalized = true;
    }

    var onInput = safe(function (event) {
      if (!event.isTrusted || finalized) return;
      removeInput();
      // In its own task, so the page's input handler is not extended.
      if (global.document.visibilityState === 'hidden') {
        finalize();
      } else {
        global.setTimeout(safe(finalize), 0);
      }
    });

    function removeInput() {
      for (var i = 0; i < inputTypes.length; i++) {
        global.removeEventListener(inputTypes[i], onInput, true);
      }
    }

    rec = observe(['largest-contentful-paint'], handle);
    if (!rec) return null;
    for (var i = 0; i < inputTypes.length; i++) {
      global.addEventListener(inputTypes[i], onInput, true);
    }
    // As web-vitals: the restored page's LCP is the time from the restore
    // to the second animation frame after it, final at once.
    restoreHandlers.push(function (event) {
      finalize();
      var restored = newMetric('LCP');
      m = restored;
      var restoredAt = event && typeof event.timeStamp === 'number' ? event.timeStamp : global.performance.now();
      doubleRAF(
        safe(function () {
          setValue(restored, Math.max(global.performance.now() - restoredAt, 0));
        })
      );
    });
    return {finalize: safe(finalize)};
  }

  // ---- CLS -------------------------------------------------------------

  function startCLS() {
    var m = newMetric('CLS');
    var sessionValue = 0;
    var sessionFirst = null;
    var sessionLast = null;
    var hadFCP = false;

    function handle(entries) {
      for (var i = 0; i < entries.length; i++) {
        var e = entries[i];
        // The whole life of the page: shifts while or after it was hidden count.
        if (e.hadRecentInput) continue;
        if (
          sessionValue &&
          sessionFirst !== null &&
          e.startTime - sessionLast < 1000 &&
          e.startTime - sessionFirst < 5000
        ) {
          sessionValue += e.value;
          sessionLast = e.startTime;
        } else {
          sessionValue = e.value;
          sessionFirst = e.startTime;
          sessionLast = e.startTime;
        }
        if (sessionValue > m.value) m.value = sessionValue;
      }
      if (hadFCP) m.hasValue = true;
    }

    function handlePaint(entries) {
      for (var i = 0; i < entries.length; i++) {
        var e = entries[i];
        if (e.name === 'first-contentful-paint' && beforeHidden(e)) {
          hadFCP = true;
          m.hasValue = true;
          if (paintRec) {
            try {
              paintRec.po.disconnect();
            } catch (err) {
              /* ignore */
            }
            paintRec.active = false;
          }
        }
      }
    }

    var rec = observe(['layout-shift'], handle);
    if (!rec) return;
    // CLS is reported only once the page has painted content (web-vitals
    // ties it to FCP); without paint timing, report it anyway.
    var paintRec = observe(['paint'], handlePaint);
    if (!paintRec) {
      hadFCP = true;
      m.hasValue = true;
    }
    // As web-vitals: the restored page's CLS starts again at 0.
    restoreHandlers.push(function () {
      sessionValue = 0;
      sessionFirst = null;
      sessionLast = null;
      m = newMetric('CLS');
      if (hadFCP) m.hasValue = true;
    });
  }

  // ---- INP -------------------------------------------------------------

  function startINP() {
    var PET = global.PerformanceEventTiming;
    if (!(PET && PET.prototype && 'interactionId' in PET.prototype)) return;
    var m = newMetric('INP');
    var longest = []; // [{id, latency}], sorted by latency, descending
    var byId = {};
    var countBefore = 0; // interactions before the last back/forward-cache restore

    // Without performance.interactionCount, web-vitals' polyfill: every
    // event entry (durationThreshold 0) with an interactionId; Chromium
    // numbers interactions 7 apart, so count ~ (max - min) / 7 + 1.
    var polyfill = null;
    var minId = Infinity;
    var maxId = 0;
    var estimate = 0;
    if (!('interactionCount' in global.performance)) {
      // Observed before INP's own entries, so takeAllRecords() updates the
      // count first.
      polyfill = observe(
        ['event'],
        function (entries) {
          for (var i = 0; i < entries.length; i++) {
            var id = entries[i].interactionId;
            if (!id) continue;
            if (id < minId) minId = id;
            if (id > maxId) maxId = id;
            estimate = maxId ? (maxId - minId) / 7 + 1 : 0;
          }
          update();
        },
        {durationThreshold: 0}
      );
    }

    function interactionCount() {
      if (polyfill) return estimate;
      var n = global.performance.interactionCount;
      return typeof n === 'number' ? n : 0;
    }

    function handle(entries) {
      for (var i = 0; i < entries.length; i++) {
        // The whole life of the page: interactions after it was hidden count.
        var e = entries[i];
        var id = e.interactionId;
        if (!id) continue;
        var existing = byId[id];
        var minLongest = longest[longest.length - 1];
        if (existing) {
          if (e.duration > existing.latency) existing.latency = e.duration;
        } else if (longest.length < MAX_INTERACTIONS || e.duration > minLongest.latency) {
          var interaction = {id: id, latency: e.duration};
          byId[id] = interaction;
          longest.push(interaction);
        } else {
          continue;
        }
        longest.sort(function (a, b) {
          return b.latency - a.latency;
        });
        var removed = longest.splice(MAX_INTERACTIONS);
        for (var j = 0; j < removed.length; j++) delete byId[removed[j].id];
      }
      update();
    }

    function update() {
      if (!longest.length) return;
      var count = Math.max(0, interactionCount() - countBefore);
      var index = Math.min(longest.length - 1, Math.floor(count / 50));
      setValue(m, longest[index].latency);
    }

    var rec = observe(['event', 'first-input'], handle, {durationThreshold: 40});
    if (!rec) {
      delete metrics.INP;
      if (polyfill) {
        try {
          polyfill.po.disconnect();
        } catch (e) {
          /* ignore */
        }
        polyfill.active = false;
      }
      return;
    }
    // As web-vitals: the restored page's INP counts only its own interactions.
    restoreHandlers.push(function () {
      countBefore = interactionCount();
      longest = [];
      byId = {};
      m = newMetric('INP');
    });
  }

  // ---- reporting -------------------------------------------------------

  function snapshot(name) {
    var m = metrics[name];
    if (!m || !m.hasValue) return null;
    return {value: m.value, rating: rating(name, m.value)};
  }

  function send(list) {
    var url = config.endpoint + '/collector/vitals';
    var body = JSON.stringify({
      apiKey: config.apiKey,
      experiment: context.experiment,
      phase: context.phase,
      page: String(global.location.href),
      metrics: list
    });
    var queued = false;
    try {
      var nav = global.navigator;
      if (nav && typeof nav.sendBeacon === 'function') {
        queued = nav.sendBeacon(url, body) === true;
      }
    } catch (e) {
      queued = false;
    }
    if (!queued && typeof global.fetch === 'function') {
      try {
        var p = global.fetch(url, {
          method: 'POST',
          body: body,
          keepalive: true,
          credentials: 'omit',
          headers: {'content-type': 'text/plain'}
        });
        if (p && p['catch']) p['catch'](function () {});
        queued = true;
      } catch (e) {
        queued = false;
      }
    }
    return queued;
  }

  function flush() {
    if (!started || !config) return false;
    takeAllRecords();
    // The page is in no experiment (or its context is not known yet): the
    // host would refuse the report. Unsent metrics go at a later flush.
    if (context.experiment === null || context.experiment === undefined) return false;
    var pending = [];
    var names = ['LCP', 'CLS', 'INP'];
    for (var i = 0; i < names.length; i++) {
      var m = metrics[names[i]];
      if (!m || !m.hasValue || m.lastSent === m.value) continue;
      pending.push(m);
    }
    if (!pending.length) return false;
    var any = false;
    for (var start = 0; start < pending.length; start += MAX_METRICS_PER_BEACON) {
      var chunk = pending.slice(start, start + MAX_METRICS_PER_BEACON);
      var list = [];
      for (var j = 0; j < chunk.length; j++) {
        list.push({
          name: chunk[j].name,
          value: chunk[j].value,
          rating: rating(chunk[j].name, chunk[j].value),
          id: chunk[j].id,
          navigation_type: chunk[j].navigation_type
        });
      }
      if (send(list)) {
        any = true;
        for (var k = 0; k < chunk.length; k++) chunk[k].lastSent = chunk[k].value;
      }
    }
    return any;
  }

  // ---- start-up --------------------------------------------------------

  function fetchContext() {
    var seq = ++contextSeq;
    if (typeof global.fetch !== 'function') return Promise.resolve();
    var url =
      config.endpoint + '/collector/context?page=' + encodeURIComponent(String(global.location.href));
    var controller = null;
    var timer = null;
    try {
      controller = typeof AbortController === 'function' ? new AbortController() : null;
    } catch (e) {
      controller = null;
    }
    var opts = {
      method: 'GET',
      headers: {'x-api-key': config.apiKey},
      credentials: 'omit',
      cache: 'no-store'
    };
    if (controller) {
      opts.signal = controller.signal;
      timer = global.setTimeout(function () {
        try {
          controller.abort();
        } catch (e) {
          /* ignore */
        }
      }, 10000);
    }
    return global
      .fetch(url, opts)
      .then(function (res) {
        if (!res.ok) throw new Error('HTTP ' + res.status);
        return res.json();
      })
      .then(function (ctx) {
        if (seq !== contextSeq) return; // a newer request (bfcache restore) decides
        if (ctx && typeof ctx === 'object') {
          context = {
            experiment: ctx.experiment === undefined || ctx.experiment === null ? null : String(ctx.experiment),
            phase: typeof ctx.phase === 'string' ? ctx.phase : null
          };
        }
      })
      ['catch'](function (e) {
        if (seq !== contextSeq) return;
        context = {experiment: null, phase: null};
        warn('Faultline: could not fetch the experiment context:', e && e.message ? e.message : e);
      })
      .then(function () {
        if (timer !== null) global.clearTimeout(timer);
      });
  }

  function registerWorker(url) {
    try {
      var sw = global.navigator && global.navigator.serviceWorker;
      if (!sw || typeof sw.register !== 'function') {
        warn('Faultline: service workers are not available here');
        return;
      }
      sw.register(url)['catch'](function (e) {
        warn('Faultline: service worker registration failed:', e && e.message ? e.message : e);
      });
    } catch (e) {
      warn('Faultline: service worker registration failed:', e);
    }
  }

  function startMeasuring() {
    if (started) return;
    started = true;
    computeNavigation();
    initVisibility();
    var lcp = startLCP();
    startCLS();
    startINP();
    var onHidden = safe(function () {
      if (lcp) lcp.finalize();
      flush();
    });
    global.addEventListener(
      'visibilitychange',
      function () {
        if (global.document.visibilityState === 'hidden') onHidden();
      },
      true
    );
    global.addEventListener('pagehide', onHidden, true);
    global.addEventListener(
      'pageshow',
      safe(function (event) {
        if (!event || !event.persisted) return;
        // Restored from the back/forward cache: new metrics for it.
        navigationType = 'back-forward-cache';
        global.setTimeout(safe(resetHiddenTime), 0);
        for (var i = 0; i < restoreHandlers.length; i++) {
          try {
            restoreHandlers[i](event);
          } catch (e) {
            warn('Faultline collector:', e);
          }
        }
      }),
      true
    );
  }

  // On a back/forward-cache restore the page may be in another experiment
  // (or phase, or none) than when it was left: ask again. Until the answer,
  // nothing is sent.
  function onRestoreContext(event) {
    if (!event || !event.persisted || !config) return;
    context = {experiment: null, phase: null};
    fetchContext();
  }

  function init(options) {
    if (initPromise) return initPromise;
    if (typeof Promise === 'undefined') return undefined;
    // Invalid arguments: warn and do nothing (a later valid call still works).
    options = options || {};
    if (typeof options.apiKey !== 'string' || !options.apiKey) {
      warn('Faultline.init: apiKey (string) is required');
      return Promise.resolve();
    }
    if (typeof options.endpoint !== 'string' || !options.endpoint) {
      warn('Faultline.init: endpoint (string) is required');
      return Promise.resolve();
    }
    initPromise = new Promise(function (resolve) {
      try {
        config = {apiKey: options.apiKey, endpoint: options.endpoint.replace(/\/+$/, '')};
        if (typeof options.serviceWorker === 'string' && options.serviceWorker) {
          registerWorker(options.serviceWorker);
        }
        if (typeof global.PerformanceObserver === 'function') {
          var begin = safe(startMeasuring);
          if (global.document.prerendering) {
            // As web-vitals: measure from activation of a prerendered page.
            global.addEventListener('prerenderingchange', begin, {capture: true, once: true});
          } else {
            begin();
          }
        }
        global.addEventListener('pageshow', safe(onRestoreContext), true);
        fetchContext().then(resolve, resolve);
      } catch (e) {
        warn('Faultline.init:', e);
        resolve();
      }
    });
    return initPromise;
  }

  var api = {
    __faultlineCollector: true,
    init: function (options) {
      try {
        return init(options);
      } catch (e) {
        warn('Faultline.init:', e);
        return typeof Promise !== 'undefined' ? Promise.resolve() : undefined;
      }
    },
    flush: function () {
      try {
        return flush() === true;
      } catch (e) {
        warn('Faultline.flush:', e);
        return false;
      }
    },
    vitals: function () {
      var out = {LCP: null, CLS: null, INP: null};
      try {
        if (started) takeAllRecords();
        out.LCP = snapshot('LCP');
        out.CLS = snapshot('CLS');
        out.INP = snapshot('INP');
      } catch (e) {
        warn('Faultline.vitals:', e);
      }
      return out;
    }
  };

  try {
    global.Faultline = api;
  } catch (e) {
    /* ignore */
  }
})(typeof window !== 'undefined' ? window : this);
