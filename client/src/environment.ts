// Where the gradguard package comes from (`gradguard.importStrategy`) and how it gets installed.
//
// fromEnvironment: gradguard must be importable by the chosen interpreter; when it is not, the extension
//   offers to `pip install` it there.
// useBundled: gradguard depends on libcst, whose parser is a native (Rust) extension module, so a
//   platform-neutral VSIX cannot carry it as pure Python the way pure-Python tools are bundled.  Instead the
//   extension owns a virtual environment in its global storage (`<globalStorage>/venv-<version>`), created on
//   first use with `python -m venv` from the chosen interpreter and filled with `pip install gradguard==<version>`
//   (pip picks the right native wheels for the platform).  A stamp file records what was installed; a new
//   extension version gets a new venv.
//
// No `vscode` import: processes are started through an injected runner, so this is unit-tested.

import * as path from "path";
import { execFile } from "child_process";

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  error?: string;
}

export type Runner = (command: string, args: string[], options?: { cwd?: string; timeoutMs?: number }) => Promise<RunResult>;

/** Runs a process to completion (no shell), capturing its output. */
export const runProcess: Runner = (command, args, options = {}) =>
  new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd: options.cwd, timeout: options.timeoutMs ?? 600_000, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, PYTHONUNBUFFERED: "1" } },
      (err, stdout, stderr) => {
        const errCode = (err as { code?: unknown } | null)?.code;
        const code = err ? (typeof errCode === "number" ? errCode : null) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr), error: err ? err.message : undefined });
      },
    );
  });

/** What `python -c PROBE` prints: gradguard's version, or an error naming the missing module. */
export const PROBE = "import sys\ntry:\n    import gradguard\nexcept Exception as e:\n    print('missing:' + type(e).__name__ + ': ' + str(e))\n    sys.exit(3)\nprint('gradguard:' + gradguard.__version__)\n";

export interface Probe {
  installed: boolean;
  version?: string;
  detail: string;
}

export function parseProbe(result: RunResult): Probe {
  const line = result.stdout.split(/\r?\n/).find((l) => l.startsWith("gradguard:") || l.startsWith("missing:"));
  if (result.code === 0 && line?.startsWith("gradguard:")) {
    return { installed: true, version: line.slice("gradguard:".length).trim(), detail: line };
  }
  if (line?.startsWith("missing:")) {
    return { installed: false, detail: line.slice("missing:".length).trim() };
  }
  return { installed: false, detail: (result.error ?? result.stderr.trim()) || `exit code ${result.code}` };
}

export async function probeGradguard(python: string, run: Runner = runProcess): Promise<Probe> {
  return parseProbe(await run(python, ["-c", PROBE], { timeoutMs: 60_000 }));
}

/** The pip requirement to install: GRADGUARD_INSTALL_SPEC when set (e.g. a local checkout), else gradguard (pinned for the bundled venv). */
export function installSpec(env: Record<string, string | undefined>, version: string | undefined): string {
  const override = env.GRADGUARD_INSTALL_SPEC?.trim();
  if (override) {
    return override;
  }
  return version ? `gradguard==${version}` : "gradguard";
}

export function pipInstallArgs(spec: string): string[] {
  return ["-m", "pip", "install", "--disable-pip-version-check", "--no-input", ...spec.split(/\s+/).filter(Boolean)];
}

export function bundledVenvDir(storageDir: string, extensionVersion: string): string {
  return path.join(storageDir, `venv-${extensionVersion}`);
}

export function venvPython(venvDir: string, platform: NodeJS.Platform): string {
  return platform === "win32" ? path.win32.join(venvDir, "Scripts", "python.exe") : path.posix.join(venvDir, "bin", "python");
}

export interface BundledOptions {
  basePython: string;
  storageDir: string;
  extensionVersion: string;
  platform: NodeJS.Platform;
  env: Record<string, string | undefined>;
  exists: (p: string) => boolean;
  run?: Runner;
  /** Progress lines for the user (the output channel and the progress notification). */
  report: (message: string) => void;
}

/** Returns the bundled venv's python, creating the venv and installing gradguard into it when needed. */
export async function ensureBundled(o: BundledOptions): Promise<string> {
  const run = o.run ?? runProcess;
  const dir = bundledVenvDir(o.storageDir, o.extensionVersion);
  const python = venvPython(dir, o.platform);
  if (o.exists(python)) {
    const probe = await probeGradguard(python, run);
    if (probe.installed) {
      return python;
    }
  } else {
    o.report(`Creating gradguard's private environment in ${dir} (first use only)...`);
    const made = await run(o.basePython, ["-m", "venv", dir]);
    if (made.code !== 0) {
      throw new Error(`'${o.basePython} -m venv ${dir}' failed: ${(made.stderr || made.error || "").trim()}`);
    }
  }
  const spec = installSpec(o.env, o.extensionVersion);
  o.report(`Installing ${spec} and its dependencies (libcst, pygls) into ${dir}...`);
  const pip = await run(python, pipInstallArgs(spec));
  if (pip.code !== 0) {
    throw new Error(`'pip install ${spec}' into ${dir} failed:\n${(pip.stderr || pip.stdout || pip.error || "").trim()}`);
  }
  const probe = await probeGradguard(python, run);
  if (!probe.installed) {
    throw new Error(`gradguard is still not importable in ${dir}: ${probe.detail}`);
  }
  o.report(`gradguard ${probe.version} is ready in ${dir}.`);
  return python;
}
