#!/usr/bin/env python3
"""A loopback HTTP receiver implementing Pyroscope's ingest contract, for scry serve's tests.

POST /ingest?name=APP{k=v,...}&from=UNIX&until=UNIX&format=pprof[&sampleRate=HZ&spyName=..]
with the pprof profile (gzipped protobuf) as the multipart/form-data field "profile" (or as
the raw body). Every request is checked; each one is appended as one JSON line to --log:
{"app", "labels", "from", "until", "sample_rate", "bytes", "problems": [...], "status"}.
A request that breaks the contract gets 400 and lists its problems; wrong credentials 401.

Listens on 127.0.0.1 only (port 0: any free port, written to --port-file).
Standard library only.
"""
import argparse
import email.parser
import email.policy
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import base64
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

NAME_RE = re.compile(r'^([A-Za-z0-9._-]+)\{(.*)\}$')
LABEL_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def parse_name(name):
    """Returns (app, labels dict) or raises ValueError."""
    m = NAME_RE.match(name)
    if not m:
        raise ValueError('name is not APP{k=v,...}: %r' % name)
    labels = {}
    if m.group(2):
        for pair in m.group(2).split(','):
            if '=' not in pair:
                raise ValueError('label without =: %r' % pair)
            k, v = pair.split('=', 1)
            if not LABEL_RE.match(k):
                raise ValueError('bad label key %r' % k)
            labels[k] = v
    return m.group(1), labels


def extract_profile(headers, body):
    ctype = headers.get('Content-Type', '')
    if ctype.startswith('multipart/form-data'):
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b'Content-Type: ' + ctype.encode() + b'\r\n\r\n' + body)
        for part in msg.iter_parts():
            if part.get_param('name', header='content-disposition') == 'profile':
                return part.get_payload(decode=True)
        raise ValueError('multipart body without a "profile" field')
    return body


def go_pprof_ok(data):
    go = shutil.which('go') or ('/usr/lib/go/bin/go' if os.path.exists('/usr/lib/go/bin/go') else None)
    if not go:
        return None
    with tempfile.NamedTemporaryFile(suffix='.pb.gz') as f:
        f.write(data)
        f.flush()
        r = subprocess.run([go, 'tool', 'pprof', '-raw', f.name], capture_output=True,
                           timeout=120, env=dict(os.environ, HOME=os.environ.get('HOME', '/root')))
        return r.returncode == 0 and b'Samples:' in r.stdout


class Handler(BaseHTTPRequestHandler):
    server_version = 'fake-pyroscope/1'

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        cfg = self.server.cfg
        problems = []
        rec = {}
        status = 200
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length) if length > 0 else b''
        with self.server.lock:
            self.server.count += 1
            n = self.server.count
        if n <= cfg.fail_first:
            self.send_response(503)
            self.end_headers()
            self._record({'status': 503, 'injected_failure': True})
            return
        if cfg.tenant is not None and self.headers.get('X-Scope-OrgID') != cfg.tenant:
            problems.append('tenant header %r' % self.headers.get('X-Scope-OrgID'))
            status = 401
        if cfg.bearer is not None and self.headers.get('Authorization') != 'Bearer ' + cfg.bearer:
            problems.append('authorization %r' % self.headers.get('Authorization'))
            status = 401
        if cfg.basic is not None:
            want = 'Basic ' + base64.b64encode(cfg.basic.encode()).decode()
            if self.headers.get('Authorization') != want:
                problems.append('basic auth %r' % self.headers.get('Authorization'))
                status = 401
        if url.path != '/ingest':
            problems.append('path %r' % url.path)
        one = {k: v[0] for k, v in q.items() if len(v) == 1}
        for k, v in q.items():
            if len(v) != 1:
                problems.append('parameter %s given %d times' % (k, len(v)))
        try:
            app, labels = parse_name(one.get('name', ''))
            rec['app'], rec['labels'] = app, labels
            for k in cfg.expect_labels:
                if not labels.get(k):
                    problems.append('label %s missing' % k)
        except ValueError as e:
            problems.append(str(e))
        try:
            rec['from'], rec['until'] = int(one['from']), int(one['until'])
            if rec['from'] > rec['until']:
                problems.append('from > until')
            if rec['from'] < 1500000000:
                problems.append('from is not a Unix time in seconds')
        except (KeyError, ValueError):
            problems.append('from/until missing or not integers')
        if one.get('format') != 'pprof':
            problems.append('format %r' % one.get('format'))
        if 'sampleRate' in one:
            try:
                rec['sample_rate'] = int(one['sampleRate'])
            except ValueError:
                problems.append('sampleRate %r' % one['sampleRate'])
        try:
            prof = extract_profile(self.headers, body)
            rec['bytes'] = len(prof)
            raw = gzip.decompress(prof)
            if not raw:
                problems.append('empty profile')
            if cfg.go_check:
                ok = go_pprof_ok(prof)
                rec['go_pprof'] = ok
                if ok is False:
                    problems.append('go tool pprof cannot read the profile')
            if cfg.save_dir:
                with open(os.path.join(cfg.save_dir, '%d.pb.gz' % n), 'wb') as f:
                    f.write(prof)
                rec['saved'] = '%d.pb.gz' % n
        except (ValueError, OSError, EOFError) as e:
            problems.append('profile: %s' % e)
        if problems and status == 200:
            status = 400
        rec['problems'] = problems
        rec['status'] = status
        self._record(rec)
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.end_headers()
        self.wfile.write(json.dumps({'problems': problems}).encode())

    def _record(self, rec):
        with self.server.lock:
            with open(self.server.cfg.log, 'a') as f:
                f.write(json.dumps(rec) + '\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--port-file')
    ap.add_argument('--log', required=True)
    ap.add_argument('--tenant')
    ap.add_argument('--bearer')
    ap.add_argument('--basic', help='USER:PASSWORD')
    ap.add_argument('--expect-labels', default='', type=lambda s: [x for x in s.split(',') if x])
    ap.add_argument('--go-check', action='store_true')
    ap.add_argument('--save-dir')
    ap.add_argument('--fail-first', type=int, default=0)
    ap.add_argument('--lifetime', type=int, default=600,
                    help='exit after this many seconds whatever happens (default 600)')
    cfg = ap.parse_args()
    signal.alarm(cfg.lifetime)  # default action: terminate, so nothing outlives a killed test
    HTTPServer.allow_reuse_address = True
    srv = HTTPServer(('127.0.0.1', cfg.port), Handler)
    srv.cfg, srv.lock, srv.count = cfg, threading.Lock(), 0
    if cfg.port_file:
        tmp = cfg.port_file + '.tmp'
        with open(tmp, 'w') as f:
            f.write(str(srv.server_address[1]))
        os.rename(tmp, cfg.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == '__main__':
    sys.exit(main())
