// End-to-end test of the gradguard extension in a real VS Code (code-server) driven by headless Chromium.
//
//   node tests/e2e/vscode.e2e.mjs [--vsix gradguard-0.1.0.vsix] [--python .venv/bin/python]
//
// Installs the VSIX into a fresh, hermetic code-server (own user-data, extensions, config and XDG dirs), with
// gradguard.interpreter a plain venv of the system Python (no gradguard, no pygls: the VSIX's bundled server runs;
// --python, the test venv, only runs the CLI on the checked-out server/ and the fixed files with torch), opens a copy
// of tests/e2e/workspace and asserts from the page: the status bar item, squiggles on exactly the labelled hazard
// lines (which must also be what `gradguard check` reports), the Problems panel text, the hover, the quick-fix menu
// (`gradguard (GGxxx): ...` titles), that the preferred quick fix and "gradguard: Fix All" remove the squiggles and
// the saved file then runs backward clean with torch, and that "Run File and Explain In-place Errors" (the editor
// title button; the interpreter switched to a venv with torch and still no gradguard) shows its progress, the
// runtime diagnostic, the notification and the report.  Then, in an untrusted workspace (Restricted Mode) whose root
// holds a gradguard/ package, pygls/, json.py... that write marker files when imported: diagnostics still arrive,
// no marker appears, the bundled server is started through the launcher outside the workspace and refuses
// gradguard.runFile.
// Screenshots go to artifacts/e2e/.
// Needs tests/e2e/setup-code-server.sh (code-server, Node 24, chromium); mk/client.mk runs both.

import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
const VSIX = path.resolve(opt("--vsix", path.join(ROOT, `gradguard-${pkg.version}.vsix`)));
const PYTHON = path.resolve(opt("--python", process.env.GG_PYTHON ?? path.join(ROOT, ".venv/bin/python")));
const CACHE = process.env.GG_EDITOR_CACHE ?? path.join(ROOT, ".cache/editors");
const ARTIFACTS = path.resolve(opt("--artifacts", path.join(ROOT, "artifacts/e2e")));
const CHROMIUM = process.env.GG_CHROMIUM ?? "/usr/bin/chromium";
const T0 = Date.now();

const log = (msg) => console.log(`[e2e ${((Date.now() - T0) / 1000).toFixed(1)}s] ${msg}`);
// The step under way, named when a step throws: Playwright's errors end with a long call log that hides the step.
let step = "start-up";
const section = (name) => {
  step = name;
  log(`--- ${name}`);
};
let failures = 0;
function check(cond, what, detail = "") {
  if (cond) {
    log(`ok   ${what}`);
  } else {
    failures++;
    log(`FAIL ${what}${detail ? `\n     ${String(detail).replace(/\n/g, "\n     ")}` : ""}`);
  }
  return cond;
}

function codeServerBin() {
  const r = spawnSync("bash", [path.join(ROOT, "tests/e2e/setup-code-server.sh")], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  if (r.status !== 0) {
    throw new Error("tests/e2e/setup-code-server.sh failed");
  }
  return r.stdout.trim().split("\n").at(-1);
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitFor(fn, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) {
        return last;
      }
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? `: ${last.message}` : ""}`);
}

/** Lines (1-based) of the rule labels `# hazard: GGxxx` in a fixture file. */
function labelledHazards(file) {
  const out = new Map();
  fs.readFileSync(file, "utf8")
    .split("\n")
    .forEach((line, i) => {
      const m = /# hazard: (GG\d{3})/.exec(line);
      if (m) {
        out.set(i + 1, m[1]);
      }
    });
  return out;
}

// The test's own gradguard CLI runs use the checked-out server/ (whatever the venv has installed), like the VSIX does.
const CLI_ENV = { ...process.env, PYTHONPATH: [path.join(ROOT, "server"), process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) };

function gradguardCheck(file) {
  const r = spawnSync(PYTHON, ["-m", "gradguard", "check", "--format", "json", "--exit-zero", file], { encoding: "utf8", env: CLI_ENV });
  if (r.status !== 0) {
    throw new Error(`gradguard check failed: ${r.stderr}`);
  }
  return JSON.parse(r.stdout);
}

/** A fix's title as the quick-fix menu shows it (server/gradguard/lsp/convert.py action_title; short titles). */
const menuTitle = (code, fx) =>
  fx.kind === "noqa"
    ? `gradguard (${code}): suppress on this line (# noqa: ${code})`
    : `gradguard (${code}): ${fx.title.replace(/`/g, "").replace(/^[A-Z](?![A-Z])/, (c) => c.toLowerCase())}`;

const norm = (s) => s.replace(/`/g, "").replace(/\s+/g, " ").trim(); // \s includes the editor's U+00A0
/** A message as the editor shows it: `code` in the CLI's text becomes "code" (server/gradguard/lsp/convert.py plain). */
const plain = (s) => s.replace(/`([^`\n]*)`/g, '"$1"');
/** Without any whitespace: the Output view wraps long lines anywhere. */
const squash = (s) => s.replace(/\s+/g, "");

/** Files below `dir` whose path matches `re`. */
function findFiles(dir, re) {
  if (!fs.existsSync(dir)) {
    return [];
  }
  return fs.readdirSync(dir, { recursive: true }).map((f) => path.join(dir, String(f))).filter((f) => re.test(f) && fs.statSync(f).isFile());
}

/**
 * Whether the server publishes diagnostics for notebook cells under VS Code's real cell URIs
 * (`vscode-notebook-cell:...#W1sZmlsZQ%3D%3D`, percent-encoded): talks LSP to `python -m gradguard lsp`
 * directly, so that a server-side gap is told apart from a client-side one.
 */
async function serverHandlesVscodeCellUris(wsDir) {
  const child = spawn(PYTHON, ["-m", "gradguard", "lsp"], { stdio: ["pipe", "pipe", "ignore"], env: CLI_ENV });
  let buf = Buffer.alloc(0);
  const got = [];
  child.stdout.on("data", (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const sep = buf.indexOf("\r\n\r\n");
      if (sep < 0) {
        return;
      }
      const len = Number(/Content-Length: (\d+)/i.exec(buf.subarray(0, sep).toString())?.[1]);
      if (buf.length < sep + 4 + len) {
        return;
      }
      got.push(JSON.parse(buf.subarray(sep + 4, sep + 4 + len).toString()));
      buf = buf.subarray(sep + 4 + len);
    }
  });
  const send = (m) => {
    const b = Buffer.from(JSON.stringify({ jsonrpc: "2.0", ...m }));
    child.stdin.write(`Content-Length: ${b.length}\r\n\r\n`);
    child.stdin.write(b);
  };
  const nb = `file://${wsDir}/probe.ipynb`;
  const cells = ["W0sZmlsZQ%3D%3D", "W1sZmlsZQ%3D%3D"].map((f) => `vscode-notebook-cell:${wsDir}/probe.ipynb#${f}`);
  const texts = ["import torch\nx = torch.randn(3, requires_grad=True)\ny = x.exp()", "y += 1\ny.sum().backward()"];
  try {
    send({ id: 0, method: "initialize", params: { processId: null, rootUri: `file://${wsDir}`, capabilities: { notebookDocument: { synchronization: {} } } } });
    await waitFor(() => got.some((m) => m.id === 0), 30000, "initialize");
    send({ method: "initialized", params: {} });
    send({
      method: "notebookDocument/didOpen",
      params: {
        notebookDocument: { uri: nb, notebookType: "jupyter-notebook", version: 0, cells: cells.map((document) => ({ kind: 2, document })) },
        cellTextDocuments: cells.map((uri, i) => ({ uri, languageId: "python", version: 1, text: texts[i] })),
      },
    });
    return await waitFor(
      () => got.some((m) => m.method === "textDocument/publishDiagnostics" && m.params.uri === cells[1] && m.params.diagnostics.length > 0),
      10000,
      "cell diagnostics",
    ).catch(() => false);
  } finally {
    child.kill();
  }
}

// ---------------------------------------------------------------------------------------------- page helpers

/** Lines (1-based) of the squiggles of the given kind in the visible editor. */
async function squiggleLines(page, kind = "warning") {
  return page.evaluate((cls) => {
    const editor = document.querySelector(".editor-group-container.active .monaco-editor") ?? document.querySelector(".monaco-editor");
    if (!editor) {
      return [];
    }
    const numbers = [...editor.querySelectorAll(".margin-view-overlays .line-numbers")].map((el) => {
      const r = el.getBoundingClientRect();
      return { y: r.top + r.height / 2, n: Number(el.textContent.trim()) };
    });
    const lines = new Set();
    for (const sq of editor.querySelectorAll(`.squiggly-${cls}`)) {
      const r = sq.getBoundingClientRect();
      const y = r.top + r.height / 2;
      let best = null;
      for (const ln of numbers) {
        if (!best || Math.abs(ln.y - y) < Math.abs(best.y - y)) {
          best = ln;
        }
      }
      if (best) {
        lines.add(best.n);
      }
    }
    return [...lines].sort((a, b) => a - b);
  }, kind);
}

/** The squiggle element on a given line. */
async function squiggleOnLine(page, line, kind = "warning") {
  const squiggles = page.locator(`.editor-group-container.active .monaco-editor .squiggly-${kind}`);
  const lineNumber = page.locator(".editor-group-container.active .margin-view-overlays .line-numbers", { hasText: new RegExp(`^\\s*${line}\\s*$`) });
  const lnBox = await lineNumber.first().boundingBox();
  for (let i = 0; i < (await squiggles.count()); i++) {
    const box = await squiggles.nth(i).boundingBox();
    if (box && lnBox && Math.abs(box.y + box.height / 2 - (lnBox.y + lnBox.height / 2)) < lnBox.height / 2) {
      return box;
    }
  }
  return null;
}

/**
 * Clicks `locator` as a user would.  When the click does not land (under load VS Code can leave the element's centre
 * covered, or scroll the page so that the centre is off the workbench), says what is at that point, then clicks near
 * the element's top-left corner, then clicks there without the hit-target check: the checks after each click prove
 * whether the click did what it should.
 */
async function click(locator, what) {
  try {
    await locator.click({ timeout: 10000 });
    return;
  } catch (e) {
    const box = await locator.boundingBox().catch(() => null);
    const centre = box ? [box.x + box.width / 2, box.y + box.height / 2] : null;
    const at = centre
      ? await locator
          .page()
          .evaluate(([x, y]) => {
            const el = document.elementFromPoint(x, y);
            return el ? `<${el.tagName.toLowerCase()} class="${el.className}">` : "nothing";
          }, centre)
          .catch(() => "?")
      : "no box";
    log(`click on ${what} did not land (${String(e?.message ?? e).split("\n")[0]}); box ${JSON.stringify(box)}, at its centre: ${at}`);
  }
  const corner = { position: { x: 5, y: 5 }, timeout: 10000 };
  await locator.click(corner).catch(async (e) => {
    log(`click near the top-left of ${what} did not land either (${String(e?.message ?? e).split("\n")[0]}): clicking without the hit-target check`);
    await locator.click({ ...corner, force: true });
  });
}

async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10000 });
  await input.fill(`>${title}`);
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
  await row.waitFor({ state: "visible", timeout: 10000 });
  await page.keyboard.press("Enter");
}

async function openFile(page, name) {
  // Give the workbench the keyboard (after a modal editor closed, nothing has focus).
  const lines = page.locator(".editor-group-container.active .monaco-editor .view-lines").first();
  if (await lines.isVisible().catch(() => false)) {
    await click(lines, "the active editor");
  }
  await page.keyboard.press("Control+P");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10000 });
  await input.fill(name);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first().waitFor({ timeout: 10000 });
  await page.keyboard.press("Enter");
  await page.locator(`.tabs-container .tab.active[aria-label*="${name}"], .tabs-container .tab.active:has-text("${name}")`).first().waitFor({ timeout: 10000 });
  await page.locator(".editor-group-container.active .monaco-editor .view-lines, .editor-group-container.active .notebook-editor").first().waitFor({ timeout: 15000 });
}

/** Rewrites the user settings through the editor (Preferences: Open User Settings (JSON)), as a user would. */
async function setUserSettings(page, settings, file) {
  // Code 1.139 opens it in a modal editor, older versions in a tab: find the editor showing the settings.
  const editor = page.locator('.monaco-editor:has(.view-lines:has-text("gradguard.interpreter"))').last();
  if (!(await editor.isVisible().catch(() => false))) {
    await runCommand(page, "Preferences: Open User Settings (JSON)");
  }
  await editor.waitFor({ state: "visible", timeout: 15000 });
  await click(editor.locator(".view-lines"), "the settings editor");
  await page.keyboard.press("Control+A");
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(JSON.stringify(settings)); // one line: no auto-indent in between
  const saved = () => {
    try {
      return JSON.stringify(JSON.parse(fs.readFileSync(file, "utf8"))) === JSON.stringify(settings);
    } catch {
      return false;
    }
  };
  for (let attempt = 0; attempt < 3 && !saved(); attempt++) {
    await click(editor.locator(".view-lines"), "the settings editor");
    await page.keyboard.press("Control+S");
    await waitFor(saved, 5000, "settings.json saved").catch(() => undefined);
  }
  // Close that editor (Code 1.139 shows it as a modal editor) so that the workbench has the keyboard again.
  const closeModal = page.locator('[aria-label^="Close Modal Editor"]').first();
  if (await closeModal.isVisible().catch(() => false)) {
    await click(closeModal, "Close Modal Editor");
  } else {
    await page.keyboard.press("Control+W");
  }
  await editor.waitFor({ state: "hidden", timeout: 5000 }).catch(() => undefined);
}

/** Shows the Problems panel (Ctrl+Shift+M toggles, so only when it is not visible). */
async function showProblems(page) {
  if (!(await page.locator(".markers-panel").first().isVisible().catch(() => false))) {
    await page.keyboard.press("Control+Shift+M");
  }
}

async function problemsText(page) {
  return (await page.locator(".markers-panel .monaco-list-rows").first().innerText().catch(() => "")) ?? "";
}

// ---------------------------------------------------------------------------------------------- the run

async function main() {
  if (!fs.existsSync(VSIX)) {
    throw new Error(`${VSIX} not found: run 'npm run package' first`);
  }
  const bin = codeServerBin();
  const node24 = path.join(CACHE, "node24/bin");
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gradguard-e2e-"));
  const dirs = Object.fromEntries(["user", "extensions", "xdg-config", "xdg-data", "ws"].map((d) => [d, path.join(tmp, d)]));
  Object.values(dirs).forEach((d) => fs.mkdirSync(d, { recursive: true }));
  fs.cpSync(path.join(ROOT, "tests/e2e/workspace"), dirs.ws, { recursive: true, filter: (src) => !src.includes("__pycache__") });
  // An untouched copy of the model for the severity setting check (model.py itself gets fixed on the way).
  fs.copyFileSync(path.join(ROOT, "tests/e2e/workspace/model.py"), path.join(dirs.ws, "severity.py"));
  fs.writeFileSync(path.join(tmp, "config.yaml"), "bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n");
  // The user's interpreters have nothing of gradguard's installed: the VSIX's bundled server (bundled/libs) is what
  // runs.  `bare`: a venv of the system Python without pip or any package.  `torchUser`: the same plus a .pth to
  // the test venv's site-packages, for torch (Run File); that venv's gradguard stays out of reach (an editable
  // install's own .pth is only processed in a site directory, not in a directory a .pth adds).
  const basePython = spawnSync(PYTHON, ["-c", "import os, sys; print(os.path.join(sys.base_prefix, 'bin', 'python3'))"], { encoding: "utf8" }).stdout.trim();
  const makeVenv = (name, pth) => {
    const dir = path.join(tmp, name);
    const r = spawnSync(basePython, ["-m", "venv", "--without-pip", dir], { encoding: "utf8" });
    if (r.status !== 0) {
      throw new Error(`${basePython} -m venv ${dir}: ${r.stderr}`);
    }
    if (pth) {
      const site = spawnSync(path.join(dir, "bin/python"), ["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], { encoding: "utf8" }).stdout.trim();
      fs.writeFileSync(path.join(site, "test-venv.pth"), `${pth}\n`);
    }
    return path.join(dir, "bin/python");
  };
  const importable = (py, mods) => {
    const code = `import importlib.util as u; print(" ".join(m for m in ${JSON.stringify(mods)} if u.find_spec(m)))`;
    return spawnSync(py, ["-I", "-c", code], { encoding: "utf8", cwd: tmp }).stdout.trim().split(" ").filter(Boolean);
  };
  const testSite = spawnSync(PYTHON, ["-c", "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['platlib'])"], { encoding: "utf8" }).stdout.trim().split("\n");
  const BARE = makeVenv("bare-venv");
  const TORCH_USER = makeVenv("torch-venv", [...new Set(testSite)].join("\n"));
  const bareHas = importable(BARE, ["gradguard", "pygls", "lsprotocol", "libcst", "torch"]);
  check(bareHas.length === 0, "the user's interpreter (a plain system Python venv) has neither gradguard nor its dependencies", JSON.stringify(bareHas));
  const torchHas = importable(TORCH_USER, ["gradguard", "torch"]);
  check(JSON.stringify(torchHas) === JSON.stringify(["torch"]), "the Run File interpreter has torch but no gradguard", JSON.stringify(torchHas));
  fs.mkdirSync(path.join(dirs.user, "User"), { recursive: true });
  fs.writeFileSync(
    path.join(dirs.user, "User/settings.json"),
    JSON.stringify(
      {
        "gradguard.interpreter": BARE,
        "gradguard.showNotifications": "always",
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": false,
        "workbench.editor.enablePreview": false,
        "telemetry.telemetryLevel": "off",
        "extensions.autoUpdate": false,
        "extensions.autoCheckUpdates": false,
        "update.mode": "none",
        "security.workspace.trust.enabled": false,
        "editor.minimap.enabled": false,
        "editor.hover.delay": 150,
        "files.autoSave": "off",
        "chat.disableAIFeatures": true,
        "[python]": { "editor.codeActionsOnSave": { "source.fixAll.gradguard": "explicit" } },
        // The server's own log, kept with the screenshots.
        "gradguard.args": ["--log-file", path.join(ARTIFACTS, "gradguard-lsp.log")],
      },
      null,
      2,
    ),
  );
  const env = {
    ...process.env,
    PATH: `${node24}:${process.env.PATH}`,
    XDG_CONFIG_HOME: dirs["xdg-config"],
    XDG_DATA_HOME: dirs["xdg-data"],
    HOME: tmp,
  };
  const common = ["--user-data-dir", dirs.user, "--extensions-dir", dirs.extensions, "--config", path.join(tmp, "config.yaml")];

  const inst = spawnSync(bin, [...common, "--install-extension", VSIX], { env, encoding: "utf8" });
  check(inst.status === 0 && /successfully installed/i.test(inst.stdout + inst.stderr), "the VSIX installs into a fresh code-server", inst.stdout + inst.stderr);

  const port = await freePort();
  const server = spawn(
    bin,
    [
      ...common,
      "--bind-addr",
      `127.0.0.1:${port}`,
      "--auth",
      "none",
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      "--disable-getting-started-override",
      "--ignore-last-opened",
    ],
    { env, detached: true, stdio: ["ignore", fs.openSync(path.join(ARTIFACTS, "code-server.log"), "w"), fs.openSync(path.join(ARTIFACTS, "code-server.err.log"), "w")] },
  );
  const stopServer = () => {
    try {
      process.kill(-server.pid, "SIGTERM");
    } catch {
      /* already gone */
    }
  };
  process.on("exit", stopServer);

  let browser;
  let lastPage;
  try {
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 60000, "code-server /healthz");
    log(`code-server up on port ${port}`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    const shot = async (name) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`) });
    lastPage = page;
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.ws)}`);
    await page.locator(".monaco-workbench").waitFor({ timeout: 60000 });
    await page.locator(".explorer-folders-view .monaco-list-row").first().waitFor({ timeout: 60000 });
    log("workbench loaded");

    // ------------------------------------------------------------------ the model file: diagnostics
    section("the model file: diagnostics");
    const modelPath = path.join(dirs.ws, "model.py");
    const labels = labelledHazards(modelPath);
    const cli = gradguardCheck(modelPath);
    const cliLines = [...new Set(cli.map((f) => f.line))].sort((a, b) => a - b);
    const labelLines = [...labels.keys()].sort((a, b) => a - b);
    check(JSON.stringify(cliLines) === JSON.stringify(labelLines), `gradguard check flags exactly the labelled lines ${labelLines}`, `check: ${JSON.stringify(cli.map((f) => [f.line, f.code]))}`);

    await openFile(page, "model.py");
    const ready = await waitFor(() => page.locator('[aria-label="gradguard ready"]').count(), 60000, "status bar 'gradguard ready'").catch((e) => e);
    check(!(ready instanceof Error), "status bar shows the server ready", ready instanceof Error ? ready.message : "");

    const lines = await waitFor(
      async () => {
        const l = await squiggleLines(page);
        return l.length >= labelLines.length ? l : null;
      },
      30000,
      "squiggles",
    ).catch(async () => squiggleLines(page));
    await shot("01-model-squiggles");
    check(JSON.stringify(lines) === JSON.stringify(labelLines), `squiggles on exactly the hazard lines ${labelLines}`, `squiggles on ${JSON.stringify(lines)}`);
    const otherKinds = [...(await squiggleLines(page, "error")), ...(await squiggleLines(page, "info"))];
    check(otherKinds.length === 0, "no error/info squiggles elsewhere", JSON.stringify(otherKinds));

    // ------------------------------------------------------------------ Problems panel
    section("Problems panel");
    await click(page.locator(".editor-group-container.active .monaco-editor .view-lines").first(), "the active editor");
    await showProblems(page);
    const problems = await waitFor(
      async () => {
        const t = await problemsText(page);
        return cli.every((f) => norm(t).includes(f.code)) ? t : null;
      },
      15000,
      "Problems panel rows",
    ).catch(async () => problemsText(page));
    await shot("02-problems-panel");
    for (const f of cli) {
      check(norm(problems).includes(norm(plain(f.message))), `Problems panel shows the ${f.code} message`, problems);
      check(new RegExp(`gradguard\\(${f.code}\\)|${f.code}`).test(problems) && problems.includes(`[Ln ${f.line}, Col ${f.column}]`), `Problems panel shows ${f.code} at [Ln ${f.line}, Col ${f.column}]`, problems);
    }
    await page.keyboard.press("Control+Shift+M"); // toggle the panel away

    // ------------------------------------------------------------------ hover
    section("hover");
    const gg101 = cli.find((f) => f.code === "GG101");
    const gg102 = cli.find((f) => f.code === "GG102");
    const saver101 = /output of (\w+)/.exec(gg101?.message ?? "")?.[1] ?? "exp";
    const box101 = gg101 && (await squiggleOnLine(page, gg101.line));
    if (check(Boolean(box101), "found the GG101 squiggle to hover")) {
      await page.mouse.move(box101.x + box101.width / 2, box101.y + box101.height / 2);
      const hover = await waitFor(
        async () => {
          const h = page.locator(".monaco-hover:visible").first();
          return (await h.count()) ? await h.innerText() : null;
        },
        15000,
        "hover",
      ).catch(() => "");
      await page.waitForTimeout(500);
      await shot("03-hover");
      check(new RegExp(`\\b${saver101}\\b`).test(hover) && /saved/.test(hover), `hover names the saving op (${saver101}) and what it saved`, hover);
      check(hover.includes("GG101"), "hover names the rule", hover);
      const hoverOnly = hover.replace(gg101.message, "");
      check(new RegExp(`\\b${saver101}\\b`).test(hoverOnly) && hoverOnly.length > 80, "the hover explains beyond the diagnostic message (server hover)", hover);
      await page.mouse.move(5, 500);
      await page.keyboard.press("Escape");
    }

    // ------------------------------------------------------------------ quick-fix menu, apply the preferred fix
    section("quick-fix menu, apply the preferred fix");
    const box102 = gg102 && (await squiggleOnLine(page, gg102.line));
    const preferred = gg102?.fixes.find((x) => x.preferred);
    if (check(Boolean(box102 && preferred), "found the GG102 squiggle and its preferred fix")) {
      const rows = page.locator(".action-widget .monaco-list-row");
      for (let attempt = 0; attempt < 3 && !(await rows.count()); attempt++) {
        await page.mouse.click(box102.x + box102.width / 2, box102.y + box102.height / 2);
        await page.keyboard.press("Escape");
        await page.keyboard.press("Control+.");
        await rows.first().waitFor({ timeout: 10000 }).catch(() => log(`no quick-fix menu yet (attempt ${attempt + 1})`));
      }
      const rawMenu = await rows.allInnerTexts();
      const menu = rawMenu.map((m) => m.replace(/\s+/g, " ").trim());
      await shot("04-quick-fix-menu");
      for (const fx of gg102.fixes) {
        check(menu.includes(menuTitle("GG102", fx)), `quick-fix menu offers "${menuTitle("GG102", fx)}" (the CLI's "${fx.title}")`, menu.join(" | "));
      }
      check(menu.includes("gradguard (GG102): suppress on this line (# noqa: GG102)"), "quick-fix menu offers the noqa suppression", menu.join(" | "));
      check(menu.some((m) => /^gradguard: fix all \(\d+ safe fix(es)?\)$/.test(m)), "quick-fix menu offers 'gradguard: fix all (N safe fixes)'", menu.join(" | "));
      check(!rawMenu.some((m) => m.includes("`")), "no backticks in the quick-fix titles", rawMenu.join(" | "));
      const idx = menu.indexOf(menuTitle("GG102", preferred));
      check(idx >= 0, "the preferred fix is in the menu", menu.join(" | "));
      await click(rows.nth(Math.max(idx, 0)), "the preferred fix in the quick-fix menu");
      const gone = await waitFor(async () => !(await squiggleLines(page)).includes(gg102.line), 15000, "GG102 squiggle to go").catch(() => false);
      await shot("05-after-preferred-fix");
      check(gone, `applying "${preferred.title}" removes the GG102 squiggle`, JSON.stringify(await squiggleLines(page)));
      const lineText = await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().innerText();
      check(norm(lineText).includes(norm(preferred.edits[0].text)), `the editor now reads ${preferred.edits[0].text}`);
      check((await squiggleLines(page)).includes(gg101.line), "the GG101 squiggle is still there");
    }

    // ------------------------------------------------------------------ Fix All, save, run with torch
    section("Fix All, save, run with torch");
    check((await squiggleLines(page)).length > 0, "a squiggle is left for Fix All");
    await runCommand(page, "gradguard: Fix All");
    const clean = await waitFor(async () => (await squiggleLines(page)).length === 0, 15000, "no squiggles after Fix All").catch(() => false);
    await shot("06-after-fix-all");
    check(clean, "'gradguard: Fix All' removes the remaining squiggle", JSON.stringify(await squiggleLines(page)));
    await page.keyboard.press("Control+S");
    await waitFor(async () => !(await page.locator(".tabs-container .tab.active.dirty").count()), 10000, "saved").catch(() => undefined);
    const saved = fs.readFileSync(modelPath, "utf8");
    const run = spawnSync(PYTHON, [modelPath], { encoding: "utf8", cwd: dirs.ws, timeout: 120000 });
    check(run.status === 0 && run.stdout.includes("backward ok"), "the fixed file runs backward clean with torch", `${run.stdout}\n${run.stderr.slice(-600)}\n--- file ---\n${saved}`);
    check(gradguardCheck(modelPath).length === 0, "gradguard check finds nothing in the fixed file");
    fs.writeFileSync(path.join(ARTIFACTS, "model.fixed.py"), saved);

    // ------------------------------------------------------------------ status bar item opens the output
    section("status bar item opens the output");
    await click(page.locator('[aria-label="gradguard ready"]').first(), "the status bar item");
    const outputText = await waitFor(
      async () => {
        const t = await page.locator(".output-view, .panel .output").first().innerText().catch(() => "");
        return /\[client\]/.test(t) && squash(t).includes(squash(`bundled with the extension, run by ${BARE}`)) ? t : null;
      },
      10000,
      "output channel",
    ).catch(async () => page.locator(".output-view, .panel .output").first().innerText().catch(() => ""));
    await shot("07-output");
    check(/\[client\]\s/.test(outputText), "the status bar item opens the gradguard output channel", outputText.slice(0, 500));
    check(squash(outputText).includes(squash(`bundled with the extension, run by ${BARE}`)), "the log says the bundled server runs with the user's interpreter (nothing installed into it)", outputText.slice(0, 1500));

    // ------------------------------------------------------------------ source.fixAll.gradguard on save
    section("source.fixAll.gradguard on save");
    const onSavePath = path.join(dirs.ws, "on_save.py");
    const onSaveLines = [...labelledHazards(onSavePath).keys()];
    await openFile(page, "on_save.py");
    const before = await waitFor(async () => ((await squiggleLines(page)).length ? squiggleLines(page) : null), 20000, "on_save.py squiggles").catch(() => []);
    check(JSON.stringify(before) === JSON.stringify(onSaveLines), `on_save.py: squiggle on the hazard line ${onSaveLines}`, JSON.stringify(before));
    await click(page.locator(".editor-group-container.active .monaco-editor .view-lines").first(), "the active editor");
    await page.keyboard.press("Control+End");
    await page.keyboard.press("Enter");
    await page.keyboard.press("Control+S");
    const fixedOnSave = await waitFor(() => !/\.mul_\(/.test(fs.readFileSync(onSavePath, "utf8")), 20000, "on_save.py fixed on disk").catch(() => false);
    await page.waitForTimeout(500);
    await shot("08a-fixed-on-save");
    check(fixedOnSave, "editor.codeActionsOnSave source.fixAll.gradguard rewrites the hazard when saving", fs.readFileSync(onSavePath, "utf8"));
    const onSaveRun = spawnSync(PYTHON, [onSavePath], { encoding: "utf8", cwd: dirs.ws, timeout: 120000 });
    check(onSaveRun.status === 0 && onSaveRun.stdout.includes("backward ok"), "the file fixed on save runs backward clean with torch", onSaveRun.stderr.slice(-400));

    // ------------------------------------------------------------------ Jupyter notebook
    section("Jupyter notebook");
    const cellUrisOk = await serverHandlesVscodeCellUris(dirs.ws);
    if (!cellUrisOk) {
      log("SKIP notebook checks: the server does not publish diagnostics for VS Code's percent-encoded cell URIs");
      log("     (server/gradguard/lsp/server.py _text_doc must look documents up by unquote(uri), as pygls stores them)");
    }
    await openFile(page, "notebook.ipynb");
    const nbCheck = (cond, what, detail) => (cellUrisOk ? check(cond, what, detail) : log(`skip ${what}: ${cond ? "passes" : "fails"}`));
    const nbSquiggles = await waitFor(
      async () => {
        const n = await page.locator(".notebook-editor .monaco-editor .squiggly-warning").count();
        return n > 0 ? n : null;
      },
      cellUrisOk ? 30000 : 3000,
      "squiggles in the notebook",
    ).catch(() => 0);
    await page.waitForTimeout(500);
    await shot("08b-notebook");
    nbCheck(nbSquiggles > 0, "the notebook shows a gradguard squiggle");
    const cells = page.locator(".notebook-editor .cell-list-container .monaco-list-row");
    const cellHas = [];
    for (let i = 0; i < (await cells.count()); i++) {
      cellHas.push((await cells.nth(i).locator(".squiggly-warning").count()) > 0);
    }
    nbCheck(JSON.stringify(cellHas) === JSON.stringify([false, true]), "the squiggle is in the second cell (the one with y += 1), not the first", JSON.stringify(cellHas));
    await showProblems(page);
    const nbProblems = await waitFor(async () => {
      const t = await problemsText(page);
      return /GG101/.test(t) && /notebook\.ipynb/.test(t) ? t : null;
    }, cellUrisOk ? 10000 : 1000, "notebook problems").catch(async () => problemsText(page));
    nbCheck(/notebook\.ipynb/.test(nbProblems) && /GG101/.test(nbProblems) && /\[Ln 1, Col 1\]/.test(nbProblems), "Problems panel: GG101 in notebook.ipynb at cell line 1", nbProblems);
    await shot("08c-notebook-problems");
    await page.keyboard.press("Control+Shift+M");

    // ------------------------------------------------------------------ Run File on a failing script
    section("Run File on a failing script");
    // Run File runs the script with the user's interpreter: switch to one with torch (and still no gradguard).
    const userSettingsFile = path.join(dirs.user, "User/settings.json");
    await setUserSettings(page, { ...JSON.parse(fs.readFileSync(userSettingsFile, "utf8")), "gradguard.interpreter": TORCH_USER }, userSettingsFile);
    await waitFor(async () => (await page.locator('[aria-label="gradguard ready"]').count()) === 0, 10000, "restart to begin").catch(() => undefined);
    const readyTorch = await waitFor(() => page.locator('[aria-label="gradguard ready"]').count(), 30000, "ready with the torch interpreter").catch(() => 0);
    check(readyTorch > 0, "a new gradguard.interpreter restarts the server without a reload (ready)");
    await openFile(page, "fail_run.py");
    check((await squiggleLines(page)).length === 0, "fail_run.py has no static findings (the mutation is in another module)");
    const button = page.locator('.editor-actions [aria-label*="Run File and Explain In-place Errors"]').first();
    check((await button.count()) > 0, "the editor title has the Run File button");
    await shot("08-run-file-button");
    if (await button.count()) {
      await click(button, "the Run File button");
    } else {
      await runCommand(page, "gradguard: Run File and Explain In-place Errors");
    }
    // While the script runs: a progress notification with Cancel.
    const progressToast = page.locator(".notifications-toasts .notification-toast", { hasText: "running fail_run.py" }).first();
    const progressText = await waitFor(async () => ((await progressToast.count()) ? progressToast.innerText() : null), 15000, "the Run File progress notification").catch(() => "");
    await shot("08d-run-file-progress");
    check(/gradguard: running fail_run\.py/.test(progressText) && /Cancel/.test(progressText), "Run File shows a progress notification with Cancel while the script runs", progressText);
    const runProblems = await waitFor(
      async () => {
        // The client shows its output while the script runs: bring the Problems panel (back) up.
        await showProblems(page);
        const t = await problemsText(page);
        return /gradguard-run/.test(t) ? t : null;
      },
      120000,
      "gradguard-run diagnostics",
    ).catch(async () => problemsText(page));
    await page.waitForTimeout(500);
    await shot("09-run-file-problems");
    check(/gradguard-run/.test(runProblems), "Run File publishes runtime diagnostics (source gradguard-run)", runProblems);
    check(/scaling\.py/.test(runProblems) && /\[Ln 5, Col/.test(runProblems), "the runtime diagnostic is on the in-place line in scaling.py (Ln 5)", runProblems);
    check(/sigmoid/i.test(runProblems), "the runtime diagnostic names the op that saved the tensor (sigmoid)", runProblems);
    // When it failed: an error notification with "Show Report", which opens the report in the log.
    const doneToast = page.locator(".notifications-toasts .notification-toast", { hasText: "failed with an in-place error" }).first();
    const doneText = await doneToast.innerText({ timeout: 15000 }).catch(() => "");
    await shot("09a-run-file-notification");
    check(/gradguard: fail_run\.py failed with an in-place error: 1 culprit line marked in the editor/.test(norm(doneText)) && /Show Report/.test(doneText), "Run File ends with a notification saying what failed, with 'Show Report'", doneText);
    if (/Show Report/.test(doneText)) {
      await click(doneToast.locator(".monaco-button", { hasText: "Show Report" }).first(), "Show Report");
      const report = await waitFor(
        async () => {
          const t = squash(await page.locator(".output-view, .panel .output").first().innerText().catch(() => ""));
          return /savedbysigmoid\S*fail_run\.py:7:/.test(t) && /changedbymul_\S*scaling\.py:5:/.test(t) ? t : null;
        },
        10000,
        "the Run File report in the log",
      ).catch(async () => squash(await page.locator(".output-view, .panel .output").first().innerText().catch(() => "")));
      await shot("09b-run-file-report");
      check(/failedwithanautogradin-placeerror/.test(report) && /savedbysigmoid\S*fail_run\.py:7:/.test(report) && /changedbymul_\S*scaling\.py:5:/.test(report), "'Show Report' shows the report: the saving line (fail_run.py:7) and the modifying line (scaling.py:5)", report.slice(-1500));
    }
    await openFile(page, "scaling.py");
    await page.waitForTimeout(500);
    const runSquiggles = [...(await squiggleLines(page, "error")), ...(await squiggleLines(page, "warning"))];
    await shot("10-run-file-squiggle");
    check(runSquiggles.includes(5), "scaling.py shows a squiggle on the in-place line 5", JSON.stringify(runSquiggles));

    // ------------------------------------------------------------------ restart keeps working
    section("restart keeps working");
    await runCommand(page, "gradguard: Restart Server");
    await waitFor(async () => (await page.locator('[aria-label="gradguard ready"]').count()) === 0, 10000, "restart to begin").catch(() => undefined);
    const back = await waitFor(() => page.locator('[aria-label="gradguard ready"]').count(), 30000, "ready after restart").catch(() => 0);
    check(back > 0, "'gradguard: Restart Server' brings the server back to ready");
    await shot("11-after-restart");

    // ------------------------------------------------------------------ settings apply without a reload
    section("settings apply without a reload");
    const settings = JSON.parse(fs.readFileSync(userSettingsFile, "utf8"));
    // gradguard.severity goes to the running server (didChangeConfiguration): GG101 becomes an error.
    await setUserSettings(page, { ...settings, "gradguard.severity": { GG101: "error" } }, userSettingsFile);
    await openFile(page, "severity.py");
    const sev = await waitFor(
      async () => {
        const [err, warn] = [await squiggleLines(page, "error"), await squiggleLines(page, "warning")];
        return err.includes(gg101.line) && warn.includes(gg102.line) ? { err, warn } : null;
      },
      20000,
      "GG101 as an error",
    ).catch(async () => ({ err: await squiggleLines(page, "error"), warn: await squiggleLines(page, "warning") }));
    await shot("11a-severity");
    check(JSON.stringify(sev.err) === JSON.stringify([gg101.line]) && JSON.stringify(sev.warn) === JSON.stringify([gg102.line]), `gradguard.severity {"GG101": "error"} applies without a restart (error squiggle on ${gg101.line}, warning on ${gg102.line})`, JSON.stringify(sev));
    await setUserSettings(page, { ...settings, "gradguard.enable": false }, userSettingsFile);
    const disabled = await waitFor(() => page.locator('[aria-label="gradguard disabled"]').count(), 20000, "disabled").catch(() => 0);
    check(disabled > 0, "gradguard.enable=false stops the server without a reload (status 'disabled')");
    // Enabled again with the plain system Python: the bundled server starts, nothing is installed or offered.
    await setUserSettings(page, { ...settings, "gradguard.enable": true, "gradguard.interpreter": BARE }, userSettingsFile);
    const reenabled = await waitFor(() => page.locator('[aria-label="gradguard ready"]').count(), 30000, "ready again").catch(() => 0);
    await openFile(page, "severity.py");
    const linesAgain = await waitFor(async () => {
      const l = await squiggleLines(page);
      return JSON.stringify(l) === JSON.stringify(labelLines) ? l : null;
    }, 20000, "squiggles again").catch(async () => squiggleLines(page));
    await runCommand(page, "gradguard: Show Debug Info");
    const debugInfo = await waitFor(
      async () => {
        const t = squash(await page.locator(".output-view, .panel .output").first().innerText().catch(() => ""));
        return /serverstate:Running/.test(t) && /server:\{"gradguard":/.test(t) ? t : null;
      },
      10000,
      "debug info",
    ).catch(async () => squash(await page.locator(".output-view, .panel .output").first().innerText().catch(() => "")));
    await shot("12-reenabled-debug-info");
    const installToasts = await page.locator(".notifications-toasts .notification-toast", { hasText: /not installed|Install/ }).count();
    check(reenabled > 0 && JSON.stringify(linesAgain) === JSON.stringify(labelLines), "gradguard.enable=true with the plain Python: ready again, squiggles back", JSON.stringify(linesAgain));
    check(installToasts === 0, "no 'not installed' / 'Install' notification: the VSIX needs nothing in the user's environment");
    // The tail of it (the Output view shows the last lines): the server's own view of what runs it.
    check(debugInfo.includes(`"python":"${BARE}"`) && /"location":"[^"]*\/extensions\/[^"]*\/bundled\/libs\/gradguard"/.test(debugInfo) && debugInfo.includes('"flags":{"isolated":true'), "'gradguard: Show Debug Info': the server runs from the VSIX's bundled/libs, isolated, with the user's interpreter", debugInfo.slice(-1500));
    await page.close();
    stopServer();

    // ------------------------------------------------------------------ an untrusted workspace (Restricted Mode)
    section("an untrusted workspace (Restricted Mode)");
    // A second code-server with workspace trust on, a workspace whose .vscode/settings.json points
    // gradguard.interpreter at a program that must never run, whose root holds modules that would shadow the
    // server's own (a gradguard/ package, pygls/, json.py, typing_extensions.py, sitecustomize.py: each writes a
    // marker when imported), and the user answering "No, I don't trust".
    const untrustedWs = path.join(tmp, "untrusted-ws");
    fs.cpSync(path.join(ROOT, "tests/e2e/workspace"), untrustedWs, { recursive: true, filter: (src) => !src.includes("__pycache__") });
    const marker = path.join(tmp, "evil-ran");
    const evil = path.join(tmp, "evil-python");
    fs.writeFileSync(evil, `#!/bin/sh\ntouch ${marker}\nexit 1\n`, { mode: 0o755 });
    fs.mkdirSync(path.join(untrustedWs, ".vscode"));
    fs.writeFileSync(path.join(untrustedWs, ".vscode/settings.json"), JSON.stringify({ "gradguard.interpreter": evil, "gradguard.args": ["--evil"] }));
    const shadowMarkers = path.join(tmp, "shadow-markers");
    fs.mkdirSync(shadowMarkers);
    const shadows = ["gradguard/__init__.py", "gradguard/__main__.py", "pygls/__init__.py", "json.py", "typing_extensions.py", "sitecustomize.py"];
    for (const rel of shadows) {
      fs.mkdirSync(path.dirname(path.join(untrustedWs, rel)), { recursive: true });
      const name = rel.replace(/\//g, ".");
      fs.writeFileSync(path.join(untrustedWs, rel), `open(${JSON.stringify(path.join(shadowMarkers, name))}, "w").close()\n`);
    }
    // The server's log (the user's gradguard.args --log-file): the untrusted server appends its start-up line.
    const serverLog = path.join(ARTIFACTS, "gradguard-lsp.log");
    const serverLogBefore = fs.existsSync(serverLog) ? fs.readFileSync(serverLog, "utf8").length : 0;
    const user2 = path.join(tmp, "user2");
    fs.mkdirSync(path.join(user2, "User"), { recursive: true });
    const userSettings = JSON.parse(fs.readFileSync(path.join(dirs.user, "User/settings.json"), "utf8"));
    fs.writeFileSync(
      path.join(user2, "User/settings.json"),
      JSON.stringify({ ...userSettings, "gradguard.interpreter": BARE, "gradguard.enable": true, "security.workspace.trust.enabled": true, "security.workspace.trust.startupPrompt": "always" }),
    );
    const port2 = await freePort();
    const server2 = spawn(
      bin,
      ["--user-data-dir", user2, "--extensions-dir", dirs.extensions, "--config", path.join(tmp, "config.yaml"), "--bind-addr", `127.0.0.1:${port2}`, "--auth", "none", "--disable-telemetry", "--disable-update-check", "--disable-getting-started-override", "--ignore-last-opened"],
      { env, detached: true, stdio: ["ignore", fs.openSync(path.join(ARTIFACTS, "code-server-untrusted.log"), "w"), "ignore"] },
    );
    process.on("exit", () => {
      try {
        process.kill(-server2.pid, "SIGTERM");
      } catch {
        /* already gone */
      }
    });
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port2}/healthz`)).ok, 60000, "second code-server /healthz");
    const page2 = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    lastPage = page2;
    await page2.goto(`http://127.0.0.1:${port2}/?folder=${encodeURIComponent(untrustedWs)}`);
    await page2.locator(".monaco-workbench").waitFor({ timeout: 60000 });
    const noTrust = page2.locator(".monaco-dialog-box .monaco-button", { hasText: /No, I don.t trust/ }).first();
    await noTrust.waitFor({ timeout: 30000 });
    await page2.screenshot({ path: path.join(ARTIFACTS, "13-trust-prompt.png") });
    await click(noTrust, "No, I do not trust");
    await page2.locator(".explorer-folders-view .monaco-list-row").first().waitFor({ timeout: 60000 });
    await openFile(page2, "model.py");
    const ready2 = await waitFor(() => page2.locator('[aria-label="gradguard ready"]').count(), 60000, "ready (untrusted)").catch(() => 0);
    const lines2 = await waitFor(async () => ((await squiggleLines(page2)).length ? squiggleLines(page2) : null), 30000, "squiggles (untrusted)").catch(() => []);
    const runButton2 = await page2.locator('.editor-actions [aria-label*="Run File and Explain In-place Errors"]').count();
    await page2.screenshot({ path: path.join(ARTIFACTS, "14-untrusted.png") });
    check(ready2 > 0 && JSON.stringify(lines2) === JSON.stringify(labelLines), "untrusted workspace: linting still works (limited support)", JSON.stringify(lines2));
    check(!fs.existsSync(marker), "untrusted workspace: the workspace's gradguard.interpreter is never run (restrictedConfigurations)");
    const shadowed = fs.readdirSync(shadowMarkers);
    check(ready2 > 0 && lines2.length > 0 && shadowed.length === 0, "untrusted workspace: diagnostics arrive and none of the workspace's gradguard/, pygls/, json.py, typing_extensions.py, sitecustomize.py is imported", `imported: ${JSON.stringify(shadowed)}`);
    const untrustedLog = await waitFor(() => {
      const t = fs.existsSync(serverLog) ? fs.readFileSync(serverLog, "utf8").slice(serverLogBefore) : "";
      return /language server ready/.test(t) ? t : null;
    }, 10000, "the untrusted server's start-up line").catch(() => "");
    check(/workspace untrusted: gradguard\.runFile refused/.test(untrustedLog), "untrusted workspace: the client tells the server (workspaceTrusted: false), which refuses gradguard.runFile too", untrustedLog.slice(0, 600));
    // The extension's own output channel, as code-server logs it: how the server was started.
    const clientLog = findFiles(path.join(user2, "logs"), /gradguard.*\.log$/).map((f) => fs.readFileSync(f, "utf8")).join("\n");
    const started = /Starting: (.*)/.exec(clientLog)?.[1] ?? "";
    check(started.startsWith(`${BARE} -I `) && / -I \S*client\/launcher\/launch\.py --libs \S*bundled\/libs --exclude \S*untrusted-ws lsp/.test(started) && !/ -m gradguard/.test(started) && /in \S*client\/launcher\b/.test(started), "untrusted workspace: the bundled server is started through the launcher (-I, --libs bundled/libs, --exclude the workspace), outside the workspace", started || clientLog.slice(0, 600));
    check(runButton2 === 0, "untrusted workspace: no Run File button in the editor title");
    await page2.keyboard.press("F1");
    await page2.locator(".quick-input-widget input").fill(">gradguard: Run File");
    await page2.waitForTimeout(1000);
    const paletteRows = await page2.locator(".quick-input-list .monaco-list-row", { hasText: "Run File and Explain" }).count();
    check(paletteRows === 0, "untrusted workspace: Run File is not offered in the command palette");
    await page2.keyboard.press("Escape");
    try {
      process.kill(-server2.pid, "SIGTERM");
    } catch {
      /* already gone */
    }
  } catch (e) {
    // Keep what the page showed when a step broke.
    await lastPage?.screenshot({ path: path.join(ARTIFACTS, "zz-failure.png") }).catch(() => undefined);
    const dialog = await lastPage?.locator(".monaco-dialog-box").first().innerText({ timeout: 1000 }).catch(() => "");
    if (dialog) {
      log(`a dialog was open: ${dialog}`);
    }
    throw e;
  } finally {
    await browser?.close().catch(() => undefined);
    stopServer();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  log(`${failures ? `${failures} check(s) FAILED` : "all checks passed"}; screenshots in ${path.relative(ROOT, ARTIFACTS)}/`);
  process.exit(failures ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  const first = String(e?.message ?? e).split("\n")[0];
  const where = String(e?.stack ?? "").split("\n").find((l) => l.includes("vscode.e2e.mjs")) ?? "";
  console.error(`[e2e] the step "${step}" broke: ${first} ${where.trim()}`);
  process.exit(1);
});
