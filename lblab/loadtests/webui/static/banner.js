// lblab ui: the banner above Locust's header. It polls lblab/status (the lines of
// lblab/loadtests/webui/banner.py: the running strategy, the last refusal, where the
// results go) and shows them as text, never as HTML. A refusal can be dismissed.
(() => {
  const STATUS_URL = 'lblab/status';
  const POLL_MS = 1000;
  const TIMEOUT_MS = 5000;  // a fetch that hangs is given up; the next poll tries again
  const STYLE = {
    running: 'background:#0b4f8a;color:#fff;font-size:16px',
    idle: 'background:#454545;color:#fff',
    refused: 'background:#b3261e;color:#fff;font-size:15px',
    results: 'background:#e6f0e6;color:#111',
  };
  const dismissed = new Set();
  const banner = document.createElement('div');
  banner.id = 'lblab-banner';
  banner.setAttribute('role', 'status');
  banner.style.cssText = 'font-family:system-ui,sans-serif;font-size:14px;line-height:1.4';
  document.body.prepend(banner);
  let shown = '';

  function row(line) {
    const div = document.createElement('div');
    div.dataset.kind = line.kind;
    div.style.cssText = `padding:4px 16px;${STYLE[line.kind] || ''}`;
    const head = document.createElement('b');
    head.textContent = line.head;
    div.append(head, ` · ${line.text}`);
    if (line.key) {
      const close = document.createElement('button');
      close.textContent = '×';
      close.title = 'dismiss';
      close.style.cssText = 'float:right;background:none;border:0;color:inherit;font-size:18px;cursor:pointer';
      close.onclick = () => { dismissed.add(line.key); render(lines); };
      div.prepend(close);
    }
    return div;
  }

  let lines = [];
  function render(next) {
    lines = next;
    const visible = lines.filter((line) => !dismissed.has(line.key));
    const text = JSON.stringify(visible);
    if (text === shown) return;
    shown = text;
    banner.replaceChildren(...visible.map(row));
    const running = lines.find((line) => line.kind === 'running');
    document.title = running ? `${running.head} · Locust` : 'Locust';
  }

  async function poll() {
    try {
      const response = await fetch(STATUS_URL, {cache: 'no-store', signal: AbortSignal.timeout(TIMEOUT_MS)});
      if (response.ok) render(await response.json());
    } catch (error) {
      // lblab ui is busy or has ended: the last lines stay
    }
    setTimeout(poll, POLL_MS);
  }
  poll();
})();
