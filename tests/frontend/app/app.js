/*
 * Faultline test app. Query parameters:
 *   endpoint  Faultline host base URL; when set, loads {endpoint}/collector.js
 *             and calls Faultline.init({apiKey: key, endpoint, serviceWorker}).
 *   key       API key passed to the collector (and to the app's worker).
 *   sw        "app"   -> serviceWorker '/sw.js?endpoint=..&key=..' (one-line
 *                        importScripts worker at this origin),
 *             "proxy" -> serviceWorker '/faultline-sw.js' (fault proxy),
 *             absent  -> no worker.
 * Globals for tests:
 *   window.appReady = true   items listed and hero.svg loaded and painted (its
 *                            largest-contentful-paint entry was dispatched)
 *   window.appError = "..."  GET /api/items failed (or hero.svg did not load)
 *   window.apiMs, window.apiStatus   duration (ms) and HTTP status of /api/items
 *   window.faultlineReady = true      Faultline.init() resolved
 */
(function () {
  'use strict';

  var params = new URLSearchParams(location.search);
  var endpoint = (params.get('endpoint') || '').replace(/\/+$/, '');
  var key = params.get('key') || '';
  var swMode = params.get('sw');

  function $(id) {
    return document.getElementById(id);
  }

  function fail(message) {
    window.appError = message;
    var status = $('status');
    status.textContent = '';
    var err = document.createElement('p');
    err.id = 'error';
    err.textContent = 'Could not load the items: ' + message;
    status.appendChild(err);
  }

  // Faultline collector (and, optionally, its service worker).
  if (endpoint) {
    var serviceWorker;
    if (swMode === 'app') {
      serviceWorker = '/sw.js?endpoint=' + encodeURIComponent(endpoint) + '&key=' + encodeURIComponent(key);
    } else if (swMode === 'proxy') {
      serviceWorker = '/faultline-sw.js';
    }
    var script = document.createElement('script');
    script.src = endpoint + '/collector.js';
    script.onload = function () {
      var opts = {apiKey: key, endpoint: endpoint};
      if (serviceWorker) opts.serviceWorker = serviceWorker;
      Promise.resolve(window.Faultline.init(opts)).then(function () {
        window.faultlineReady = true;
      });
    };
    script.onerror = function () {
      console.warn('could not load ' + script.src);
    };
    document.head.appendChild(script);
  }

  // Items and the hero image (the LCP element): rendered only after
  // /api/items answers, so faults on /api/* or on the image worsen LCP.
  var started = performance.now();
  fetch('/api/items', {headers: {accept: 'application/json'}})
    .then(function (res) {
      window.apiStatus = res.status;
      window.apiMs = performance.now() - started;
      if (!res.ok) throw new Error('GET /api/items answered HTTP ' + res.status);
      return res.json();
    }, function (err) {
      window.apiMs = performance.now() - started;
      throw new Error('GET /api/items failed: ' + (err && err.message ? err.message : err));
    })
    .then(function (data) {
      var items = data && Array.isArray(data.items) ? data.items : [];
      var list = $('items');
      items.forEach(function (item) {
        var li = document.createElement('li');
        if (item !== null && typeof item === 'object') {
          li.textContent = item.name || item.title || item.label || JSON.stringify(item);
        } else {
          li.textContent = String(item);
        }
        list.appendChild(li);
      });
      $('status').textContent = items.length + ' items';
      var img = document.createElement('img');
      img.id = 'hero';
      img.alt = 'Hero';
      img.width = 1200;
      img.height = 600;
      img.onload = function () {
        whenPainted(img, function () {
          window.appReady = true;
        });
      };
      img.onerror = function () {
        fail('hero.svg did not load');
      };
      img.src = 'hero.svg';
      $('hero-slot').appendChild(img);
    })
    .catch(function (err) {
      fail(err && err.message ? err.message : String(err));
    });

  // Calls done() once the browser has reported the paint of the hero image
  // as a largest-contentful-paint entry (so a collector reading LCP now sees
  // it), or after 1.5 s if that never happens (no LCP support, or another
  // element is larger).
  function whenPainted(img, done) {
    var called = false;
    var po = null;
    function finish() {
      if (called) return;
      called = true;
      if (po) po.disconnect();
      done();
    }
    setTimeout(finish, 1500);
    try {
      po = new PerformanceObserver(function (list) {
        list.getEntries().forEach(function (entry) {
          if (entry.element === img || /\/hero\.svg$/.test(entry.url || '')) finish();
        });
      });
      po.observe({type: 'largest-contentful-paint', buffered: true});
    } catch (e) {
      requestAnimationFrame(function () {
        requestAnimationFrame(finish);
      });
    }
  }

  // A layout shift without user input: a banner appears above the content
  // about 300 ms after load.
  function insertBanner() {
    setTimeout(function () {
      var banner = document.createElement('div');
      banner.id = 'banner';
      banner.textContent = 'Announcement: this banner pushed the page down.';
      $('banner-slot').appendChild(banner);
    }, 300);
  }
  if (document.readyState === 'complete') {
    insertBanner();
  } else {
    window.addEventListener('load', insertBanner);
  }

  // A slow interaction: about 150 ms of main-thread work, then a DOM change.
  var clicks = 0;
  $('work').addEventListener('click', function () {
    var until = performance.now() + 150;
    while (performance.now() < until) {
      /* busy */
    }
    clicks++;
    $('work-output').textContent = clicks + (clicks === 1 ? ' click' : ' clicks');
    var li = document.createElement('li');
    li.textContent = 'work done #' + clicks;
    $('items').appendChild(li);
  });
})();
