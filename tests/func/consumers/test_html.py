#!/usr/bin/env python3
"""scry's HTML report opened by a real browser: headless Chromium (Debian's chromium).

Records shares_workload.py with the built scry as html (without -o, to check the default
.html name), loads the file from disk with network features off, and checks the rendered
DOM: the script ran (data-ready), the embedded flame graph initialised (data-fg), the
hottest line's source text and its percentage are shown, every tab is there. Then takes a
1400x1000 screenshot (kept when SCRY_SCREENSHOT_DIR is set).

usage: test_html.py SCRY [PYTHON]     prints "SKIP html: reason" and exits 0 without chromium.
"""
import glob
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402
WORKLOAD = os.path.join(HERE, "shares_workload.py")

# Appended to a copy of the report: drives the controls like a user and writes what happened
# into <body data-test>. Column 6 of the hot-line table is "samples".
DRIVER = """<script>
window.addEventListener('load', function () {
  var r = {}, d = document;
  function rows(t) { return Array.prototype.slice.call(t.tBodies[0].rows); }
  function v(row) { return parseFloat(row.cells[6].getAttribute('data-v')); }
  try {
    var t = d.getElementById('sc-hot-table'), th = t.tHead.rows[0].cells[6];
    th.click();
    var rs = rows(t);
    r.sort_desc = v(rs[0]) >= v(rs[rs.length - 1]) && th.classList.contains('desc');
    th.click();
    rs = rows(t);
    r.sort_asc = v(rs[0]) <= v(rs[rs.length - 1]) && th.classList.contains('asc');
    var f = d.getElementById('sc-filter');
    f.value = 'HOT_B';
    f.dispatchEvent(new Event('input'));
    var shown = rows(t).filter(function (x) { return !x.classList.contains('sc-hide'); });
    r.filter = shown.length > 0 && shown.length < rows(t).length && shown.every(function (x) {
      return x.getAttribute('data-k').indexOf('hot_b') >= 0; });
    f.value = '';
    f.dispatchEvent(new Event('input'));
    r.unfilter = rows(t).every(function (x) { return !x.classList.contains('sc-hide'); });
    var b = d.querySelector('button.sc-all'), far = b.closest('details').querySelector('tr.far');
    var before = getComputedStyle(far).display;
    b.click();
    r.whole_file = before === 'none' && getComputedStyle(far).display === 'table-row';
    d.querySelector('a[data-tab="sc-fn"]').click();
    r.tab = getComputedStyle(d.getElementById('sc-fn')).display === 'block' &&
            getComputedStyle(d.getElementById('sc-src')).display === 'none';
    d.querySelector('#sc-hot-table a.sc-goto').click();
    r.goto = getComputedStyle(d.getElementById('sc-src')).display === 'block';
  } catch (e) { r.error = String(e); }
  d.body.setAttribute('data-test', JSON.stringify(r));
});
</script>
"""

def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def chromium(browser, tmp, url, *extra):
    profile = tempfile.mkdtemp(prefix="profile_", dir=tmp)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-extensions", "--user-data-dir=" + profile,
           "--virtual-time-budget=3000"] + list(extra) + [url]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=180)
    return r.returncode, r.stdout, r.stderr


def run(c, browser):
    tmp = c.tmp
    check = c.expect
    r = c.scry(["record", "-q", "--rate", "200", "--format", "html", "--"] +
               c.interp.argv(c.stage(WORKLOAD), "2"), cwd=tmp, timeout=120)
    check(r.rc == 0, "scry record --format html")
    found = glob.glob(os.path.join(tmp, "scry-*.html"))
    check(len(found) == 1, "default output name scry-PID-TIME.html (%s)" % found)
    if not found:
        print(r.err)
        raise st.Fail("no html file")
    page = found[0]
    with open(page, encoding="utf-8") as f:
        static = f.read()
    check(static.startswith("<!DOCTYPE html>"), "an HTML document")

    # the hottest line per the report's own hot-line table (first row)
    m = re.search(r'id="sc-hot-table".*?<tbody>\s*<tr[^>]*><td class="loc"[^>]*>'
                  r'<a class="sc-goto" href="#(L\d+-\d+)">[^<]*</a></td><td>([^<]*)</td>'
                  r'<td class="n" data-v="[^"]*"><b>([\d.]+%)</b>', static, re.S)
    check(m is not None, "hot-line table has a first row linked to the source view")
    if not m:
        raise st.Fail("no hot-line table")
    row_id, func, pct = m.group(1), m.group(2), m.group(3)
    print("hottest line: %s in %s, %s" % (row_id, func, pct))
    check(func in ("hot_a", "hot_b"), "hottest line is in hot_a or hot_b")
    check(float(pct[:-1]) >= 20.0, "hottest line holds >= 20%% (%s)" % pct)

    url = "file://" + page
    rc, dom, err = chromium(browser, tmp, url, "--dump-dom")
    check(rc == 0 and "<body" in dom, "chromium --dump-dom loads the page")
    check('data-ready="1"' in dom, "the report's script ran without error")
    check('data-fg="1"' in dom, "the embedded flame graph initialised")
    check('class="sc-tabs"' in dom, "tabs are active")
    rm = re.search(r'<tr class="hot" id="%s"[^>]*>(.*?)</tr>' % re.escape(row_id), dom, re.S)
    check(rm is not None, "the hot line's row is in the rendered source view")
    if rm:
        row = rm.group(1)
        check("x += i * i" in html.unescape(row) or "for i in range(n):" in html.unescape(row),
              "the row shows the line's source text")
        check("<b>%s</b>" % pct in row, "the row shows its percentage %s" % pct)
    check("hot_a" in dom and "CPU Flame Graph" in dom, "functions and flame graph present")

    driven = os.path.join(tmp, "driven.html")
    with open(driven, "w", encoding="utf-8") as f:
        f.write(static.replace("</body>", DRIVER + "</body>"))
    rc, dom, err = chromium(browser, tmp, "file://" + driven, "--dump-dom")
    dm = re.search(r'data-test="([^"]*)"', dom)
    result = json.loads(html.unescape(dm.group(1))) if dm else {"error": "no result"}
    print("controls: %s" % result)
    for k in ("sort_desc", "sort_asc", "filter", "unfilter", "whole_file", "tab", "goto"):
        check(result.get(k) is True, "control works: " + k)

    shot = os.path.join(tmp, "report.png")
    rc, out, err = chromium(browser, tmp, url, "--screenshot=" + shot,
                            "--window-size=1400,1000", "--hide-scrollbars")
    ok = rc == 0 and os.path.exists(shot) and os.path.getsize(shot) > 10000
    check(ok, "screenshot taken (%d bytes)" % (os.path.getsize(shot) if os.path.exists(shot)
                                               else 0))
    keep = os.environ.get("SCRY_SCREENSHOT_DIR")
    if keep and ok:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(shot, os.path.join(keep, "scry-html-report.png"))
        shutil.copy(page, os.path.join(keep, "scry-html-report.html"))
    return "chromium renders it: script, flame graph, hot line, controls, screenshot"


def main():
    scry, python, _ = st.positional(__doc__)
    browser = find_chromium()
    if not browser:
        return st.skip_all("html", "chromium not found (install Debian's chromium)", 1)
    tests = st.Tests()
    tests.add("html", lambda c: run(c, browser))
    return st.run_on(tests.select(), scry, python, "html", "scry-consumers")


if __name__ == "__main__":
    sys.exit(main())
