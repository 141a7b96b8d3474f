/*
 * Faultline fault-injecting service worker (plain JavaScript, no build step).
 *
 * The server that serves this file prepends one line:
 *
 *   self.FAULTLINE_CONFIG = {"rules": "<rules feed URL>", "key": "<api key or ''>"};
 *
 * Without that line the worker does nothing at all (every request passes).
 *
 * Two ways to install it:
 *
 *   (a) The app serves, at its own origin, a one-line worker and registers it:
 *         // /sw.js
 *         importScripts("https://faultline.example/faultline-sw.js?key=KEY");
 *         // in the page (or Faultline.init({..., serviceWorker: '/sw.js'}))
 *         navigator.serviceWorker.register('/sw.js');
 *       The host serves GET {endpoint}/faultline-sw.js?key=KEY.
 *
 *   (b) The app is loaded through Faultline's fault proxy, which serves this
 *       script at /faultline-sw.js on the app's own origin; the page registers
 *       it: navigator.serviceWorker.register('/faultline-sw.js')
 *       (or Faultline.init({..., serviceWorker: '/faultline-sw.js'})).
 *
 * A service worker does not control the page load that registers it: faults
 * apply from the next load (or reload) on.
 *
 * Rules feed: GET <rules>?site=<encoded self.location.origin>, header
 * x-api-key when the key is not empty. Answer {"experiment", "phase",
 * "poll_ms", "rules": [{"id", "methods", "path", "probability",
 * "expires_at", "expires_in_ms", "action"}]}; action is {"kind": "delay",
 * "ms", "jitter_ms"}, {"kind": "status", "status"}, {"kind": "reset"} or
 * {"kind": "throttle", "kbps"}.
 *
 * Refreshes: the feed is asked again poll_ms (default 1000) after its last
 * answer; each request for it gives up after 3 s. After a failed refresh
 * the next waits poll_ms, then twice as long after each further failure
 * (at most 30 s); a success resets that. An answer 401 or 403 (the key was
 * revoked) drops every rule at once. A refresh runs in the background: a
 * request is decided at once with the rules the worker holds, except while
 * the worker has no feed yet (first load) and no refresh has failed: then
 * it waits for the refresh, at most 500 ms.
 *
 * Expiry: a rule ends expires_in_ms (milliseconds from the host's answer)
 * after the worker received it, so a skewed clock on either side does not
 * matter; without a valid expires_in_ms, at expires_at (epoch ms). Rules
 * end by themselves whether or not the feed answers.
 *
 * Faults apply only to same-origin requests, never to /__faultline/*,
 * /faultline-sw.js, the rules feed or the Faultline endpoint's origin (when
 * that endpoint is this very origin: never to /collector.js, /collector/*).
 * Of the live rules matching the method and path, in feed order, the first
 * whose probability draw (Math.random() < probability) succeeds applies.
 * An unmatched request is not intercepted, except one that waited for the
 * first feed: the worker answers it itself (respondWith is synchronous) and
 * passes it on with fetch(request).
 * Keepalive requests that get no fault (navigator.sendBeacon, fetch with
 * keepalive, e.g. the collector's beacons) are always forwarded by the worker
 * with fetch(request): Chromium drops a keepalive request that a fetch
 * handler declined when its page is unloading.
 */
(function () {
  'use strict';

  var CONFIG = self.FAULTLINE_CONFIG;
  if (!CONFIG || typeof CONFIG !== 'object' || typeof CONFIG.rules !== 'string' || !CONFIG.rules) {
    return;
  }

  var REFRESH_WAIT_MS = 500;
  var FEED_TIMEOUT_MS = 3000;
  var DEFAULT_POLL_MS = 1000;
  var MAX_BACKOFF_MS = 30000;
  var THROTTLE_TICK_MS = 100;

  var selfOrigin = self.location.origin;
  var key = typeof CONFIG.key === 'string' ? CONFIG.key : '';
  var rulesUrl;
  try {
    rulesUrl = new URL(CONFIG.rules, self.location.href);
  } catch (e) {
    return;
  }
  // The feed lives on the Faultline endpoint; when that is another origin the
  // whole origin is excluded (collector.js, beacons). When it is this origin
  // (the fault proxy), only Faultline's own paths are.
  var endpointOrigin = rulesUrl.origin;
  var feedUrl = new URL(rulesUrl.href);
  feedUrl.searchParams.set('site', selfOrigin);

  var rules = []; // validated rules
  var pollMs = DEFAULT_POLL_MS;
  var hasFeed = false; // a refresh has succeeded
  var failures = 0; // refreshes failed since the last success
  var nextRefreshAt = 0; // Date.now() from which the next refresh may start
  var inflight = null; // Promise of the running refresh (never rejects)

  self.addEventListener('install', function () {
    try {
      self.skipWaiting();
    } catch (e) {
      /* ignore */
    }
  });

  self.addEventListener('activate', function (event) {
    try {
      event.waitUntil(self.clients.claim());
    } catch (e) {
      /* ignore */
    }
  });

  function sleep(ms) {
    return new Promise(function (resolve) {
      setTimeout(resolve, ms);
    });
  }

  function globToRegExp(pattern) {
    var parts = String(pattern).split('*');
    for (var i = 0; i < parts.length; i++) {
      parts[i] = parts[i].replace(/[.+?^${}()|[\]\\]/g, '\\$&');
    }
    return new RegExp('^' + parts.join('.*') + '$');
  }

  // A feed rule as the worker holds it, or null. receivedAt: Date.now()
  // when the feed's answer arrived; the rule ends expires_in_ms after it
  // (the host's and this machine's clocks may disagree), else at expires_at.
  function validRule(r, receivedAt) {
    if (!r || typeof r !== 'object') return null;
    var a = r.action;
    if (!a || typeof a !== 'object') return null;
    var expiresAt;
    if (typeof r.expires_in_ms === 'number' && isFinite(r.expires_in_ms) && r.expires_in_ms >= 0) {
      expiresAt = receivedAt + r.expires_in_ms;
    } else if (typeof r.expires_at === 'number' && isFinite(r.expires_at)) {
      expiresAt = r.expires_at;
    } else {
      return null;
    }
    var action;
    if (a.kind === 'delay') {
      var ms = Number(a.ms) || 0;
      var jitter = Number(a.jitter_ms) || 0;
      action = {kind: 'delay', ms: Math.max(0, ms), jitter_ms: Math.max(0, jitter)};
    } else if (a.kind === 'status') {
      var status = Math.floor(Number(a.status));
      if (!(status >= 200 && status <= 599)) return null;
      action = {kind: 'status', status: status};
    } else if (a.kind === 'reset') {
      action = {kind: 'reset'};
    } else if (a.kind === 'throttle') {
      var kbps = Number(a.kbps);
      if (!(kbps > 0)) return null;
      action = {kind: 'throttle', kbps: kbps};
    } else {
      return null;
    }
    var methods = [];
    if (Array.isArray(r.methods)) {
      for (var i = 0; i < r.methods.length; i++) methods.push(String(r.methods[i]).toUpperCase());
    }
    var probability = Number(r.probability);
    if (!isFinite(probability)) probability = 0;
    return {
      id: String(r.id),
      methods: methods,
      path: globToRegExp(typeof r.path === 'string' && r.path ? r.path : '*'),
      probability: probability,
      expires_at: expiresAt, // local: Date.now() of this worker
      action: action
    };
  }

  // Starts a refresh of the rules unless one is running; returns its
  // Promise, which never rejects.
  function refresh() {
    if (inflight) return inflight;
    var controller = null;
    try {
      controller = typeof AbortController === 'function' ? new AbortController() : null;
    } catch (e) {
      controller = null;
    }
    var timer = controller
      ? setTimeout(function () {
          try {
            controller.abort();
          } catch (e) {
            /* ignore */
          }
        }, FEED_TIMEOUT_MS)
      : null;
    var init = {method: 'GET', cache: 'no-store', credentials: 'omit', headers: {}};
    if (key) init.headers['x-api-key'] = key;
    if (controller) init.signal = controller.signal;
    var receivedAt = 0;
    var failed = function () {
      // Keep the last rules (each still ends by itself); back off.
      failures++;
      var wait = Math.min(MAX_BACKOFF_MS, pollMs * Math.pow(2, Math.min(failures - 1, 20)));
      nextRefreshAt = Date.now() + wait;
    };
    var p;
    try {
      p = fetch(feedUrl.href, init);
    } catch (e) {
      p = Promise.reject(e);
    }
    inflight = p
      .then(function (res) {
        receivedAt = Date.now();
        if (res.status === 401 || res.status === 403) {
          // The key was revoked: no rule applies any more.
          rules = [];
        }
        if (!res.ok) throw new Error('rules feed answered HTTP ' + res.status);
        return res.json();
      })
      .then(function (feed) {
        var next = [];
        var list = feed && Array.isArray(feed.rules) ? feed.rules : [];
        for (var i = 0; i < list.length; i++) {
          var r = validRule(list[i], receivedAt);
          if (r) next.push(r);
        }
        rules = next;
        var poll = Number(feed && feed.poll_ms);
        pollMs = poll > 0 ? Math.max(100, poll) : DEFAULT_POLL_MS;
        hasFeed = true;
        failures = 0;
        nextRefreshAt = Date.now() + pollMs;
      })
      ['catch'](function () {
        try {
          failed();
        } catch (e) {
          /* ignore */
        }
      })
      .then(function () {
        if (timer !== null) clearTimeout(timer);
        inflight = null;
      });
    return inflight;
  }

  // Starts a refresh when one is due; returns the running refresh or null.
  function refreshIfDue() {
    if (!inflight && Date.now() >= nextRefreshAt) refresh();
    return inflight;
  }

  // Whether a request should wait for the running refresh: only before the
  // first feed, and only while no refresh has failed.
  function firstLoad() {
    return !hasFeed && failures === 0 && inflight !== null;
  }

  function eligible(request) {
    var url = new URL(request.url);
    if (url.origin !== selfOrigin) return false;
    if (endpointOrigin !== selfOrigin && url.origin === endpointOrigin) return false;
    var path = url.pathname;
    if (path.indexOf('/__faultline/') === 0 || path === '/__faultline') return false;
    if (path === '/faultline-sw.js') return false;
    if (url.origin === rulesUrl.origin && path === rulesUrl.pathname) return false;
    if (endpointOrigin === selfOrigin && (path === '/collector.js' || path.indexOf('/collector/') === 0)) {
      // Faultline's endpoint shares this origin: its collector paths stay untouched.
      return false;
    }
    return true;
  }

  // The first live rule that matches the method and path and wins its
  // probability draw, or null.
  function pick(request) {
    var url = new URL(request.url);
    var method = String(request.method).toUpperCase();
    var t = Date.now();
    var live = [];
    for (var i = 0; i < rules.length; i++) {
      if (rules[i].expires_at > t) live.push(rules[i]);
    }
    rules = live;
    for (var j = 0; j < live.length; j++) {
      var r = live[j];
      if (r.methods.length && r.methods.indexOf(method) < 0) continue;
      if (!r.path.test(url.pathname)) continue;
      if (Math.random() < r.probability) return r;
    }
    return null;
  }

  function throttled(response, kbps) {
    if (!response || !response.body || response.type === 'opaque' || response.type === 'opaqueredirect') {
      return response;
    }
    if ([101, 204, 205, 304].indexOf(response.status) >= 0) return response;
    var bytesPerSecond = kbps * 1024;
    var bytesPerMs = bytesPerSecond / 1000;
    var chunkSize = Math.max(1, Math.floor((bytesPerSecond * THROTTLE_TICK_MS) / 1000));
    var reader = response.body.getReader();
    var pending = null; // Uint8Array not yet released
    var offset = 0;
    var nextAt = Date.now();
    var stream = new ReadableStream({
      pull: function (controller) {
        function release() {
          var end = Math.min(pending.length, offset + chunkSize);
          var chunk = pending.subarray(offset, end);
          offset = end;
          if (offset >= pending.length) {
            pending = null;
            offset = 0;
          }
          var wait = Math.max(0, nextAt - Date.now());
          return sleep(wait).then(function () {
            controller.enqueue(chunk);
            nextAt = Math.max(nextAt, Date.now()) + chunk.length / bytesPerMs;
          });
        }
        if (pending) return release();
        return reader.read().then(function (step) {
          if (step.done) {
            controller.close();
            return;
          }
          var value = step.value;
          if (!value || !value.length) return;
          pending = value instanceof Uint8Array ? value : new Uint8Array(value);
          offset = 0;
          return release();
        });
      },
      cancel: function (reason) {
        return reader.cancel(reason);
      }
    });
    return new Response(stream, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers
    });
  }

  function apply(rule, request) {
    var action = rule.action;
    if (action.kind === 'status') {
      var nullBody = [204, 205, 304].indexOf(action.status) >= 0;
      return new Response(nullBody ? null : 'Faultline: injected HTTP ' + action.status, {
        status: action.status,
        headers: {'content-type': 'text/plain', 'x-faultline-fault': 'status'}
      });
    }
    if (action.kind === 'reset') {
      return Response.error();
    }
    if (action.kind === 'delay') {
      var ms = Math.max(0, action.ms + (Math.random() * 2 - 1) * action.jitter_ms);
      return sleep(ms).then(function () {
        return fetch(request);
      });
    }
    if (action.kind === 'throttle') {
      return fetch(request).then(function (response) {
        try {
          return throttled(response, action.kbps);
        } catch (e) {
          return response;
        }
      });
    }
    return fetch(request);
  }

  // A request the worker leaves alone. Exception: keepalive requests
  // (navigator.sendBeacon, fetch keepalive: the collector's beacons, the
  // app's analytics). Chromium loses those when the page unloads while a
  // fetch handler declined them, so the worker forwards them itself.
  function passOn(event, request) {
    if (request.keepalive === true) event.respondWith(fetch(request));
  }

  // Keeps the worker alive until the refresh ends (it never rejects).
  function keepAlive(event, refreshing) {
    if (!refreshing) return;
    try {
      event.waitUntil(refreshing);
    } catch (e) {
      /* ignore */
    }
  }

  self.addEventListener('fetch', function (event) {
    var request = event.request;
    try {
      if (!eligible(request)) {
        passOn(event, request);
        return;
      }
      var refreshing = refreshIfDue();
      if (!firstLoad()) {
        // Decide now with the rules held; the refresh (if any) runs in the
        // background. An unmatched request is not intercepted.
        keepAlive(event, refreshing);
        var rule = pick(request);
        if (!rule) {
          passOn(event, request);
          return;
        }
        // apply() throwing here leaves the request to the browser.
        event.respondWith(Promise.resolve(apply(rule, request)));
        return;
      }
      // First load: respondWith must be called now, so the request waits (at
      // most REFRESH_WAIT_MS) for the first feed, then is faulted or passed
      // through with fetch().
      event.respondWith(
        Promise.race([refreshing, sleep(REFRESH_WAIT_MS)]).then(function () {
          var r = null;
          try {
            r = pick(request);
          } catch (e) {
            r = null;
          }
          if (!r) return fetch(request);
          try {
            return apply(r, request);
          } catch (e) {
            return fetch(request);
          }
        })
      );
      keepAlive(event, refreshing);
    } catch (e) {
      // Never break the page: an unexpected failure passes the request on.
    }
  });
})();
