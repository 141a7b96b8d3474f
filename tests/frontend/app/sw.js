const q = new URL(self.location).searchParams;
importScripts(q.get('endpoint') + '/faultline-sw.js?key=' + encodeURIComponent(q.get('key') || ''));
