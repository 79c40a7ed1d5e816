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
// Every process started here runs in a directory outside the workspace (the launcher's, client/launcher/): a
// `python -m`/`-c` puts its working directory first on sys.path, and the workspace's files must never be imported.
//
// No `vscode` import: processes are started through an injected runner, so this is unit-tested.

import * as path from "path";
import { execFile } from "child_process";

import { LAUNCH_FLAGS, isInside } from "./interpreter";

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  error?: string;
}

export type Env = Record<string, string | undefined>;

/**
 * `cwd` is required: a process must never inherit a working directory that may be the workspace.
 * `env` defaults to the extension host's environment plus PYTHONUNBUFFERED=1 (see processEnv).
 */
export type Runner = (command: string, args: string[], options: { cwd: string; env?: Env; timeoutMs?: number }) => Promise<RunResult>;

/**
 * The environment for the probe, pip and the server: `env` (the extension host's) plus PYTHONUNBUFFERED=1.  In an
 * untrusted workspace PYTHONPATH also loses its empty and relative entries (the working directory) and those
 * inside a workspace folder: Python reads PYTHONPATH before the launcher runs, so a `sitecustomize.py` there
 * would run at start-up.  A trusted workspace keeps PYTHONPATH as the user set it (Run File's scripts see it).
 */
export function processEnv(env: Env, trusted: boolean, workspaceFolders: readonly string[], platform: NodeJS.Platform): Env {
  const out: Env = { ...env, PYTHONUNBUFFERED: "1" };
  if (!trusted && env.PYTHONPATH !== undefined) {
    const p = platform === "win32" ? path.win32 : path.posix;
    const sep = platform === "win32" ? ";" : ":";
    const kept = env.PYTHONPATH.split(sep).filter((e) => e !== "" && p.isAbsolute(e) && !workspaceFolders.some((f) => isInside(e, f, platform)));
    if (kept.length > 0) {
      out.PYTHONPATH = kept.join(sep);
    } else {
      delete out.PYTHONPATH;
    }
  }
  return out;
}

/** Runs a process to completion (no shell), capturing its output. */
export const runProcess: Runner = (command, args, options) =>
  new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd: options.cwd, timeout: options.timeoutMs ?? 600_000, maxBuffer: 16 * 1024 * 1024, env: options.env ?? { ...process.env, PYTHONUNBUFFERED: "1" } },
      (err, stdout, stderr) => {
        const errCode = (err as { code?: unknown } | null)?.code;
        const code = err ? (typeof errCode === "number" ? errCode : null) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr), error: err ? err.message : undefined });
      },
    );
  });

/** The launcher shipped in the VSIX (client/launcher/launch.py) under the extension's root directory. */
export function launcherPath(extensionRoot: string): string {
  return path.join(extensionRoot, "client", "launcher", "launch.py");
}

/** Where the probe, pip and venv run: the launcher's directory (holds nothing but launch.py). */
export function safeCwd(launcher: string): string {
  return path.dirname(launcher);
}

export interface Probe {
  installed: boolean;
  version?: string;
  /** Interpreter flags the launcher asked for (`-I`, `-P`); see client/launcher/launch.py. */
  flags: string[];
  /** The interpreter's version, e.g. "3.12.4", when the launcher could report it. */
  python?: string;
  detail: string;
}

/** Parses what `python launch.py --probe` prints: `python:`, `flags:`, then `gradguard:<version>` or `missing:<why>`. */
export function parseProbe(result: RunResult): Probe {
  const lines = result.stdout.split(/\r?\n/);
  const value = (key: string) => lines.find((l) => l.startsWith(`${key}:`))?.slice(key.length + 1).trim();
  const flags = (value("flags") ?? "").split(/\s+/).filter((f) => LAUNCH_FLAGS.includes(f));
  const python = value("python");
  const version = value("gradguard");
  if (result.code === 0 && version !== undefined) {
    return { installed: true, version, flags, python, detail: `gradguard:${version}` };
  }
  const missing = value("missing");
  if (missing !== undefined) {
    return { installed: false, flags, python, detail: missing };
  }
  return { installed: false, flags, python, detail: (result.error ?? result.stderr.trim()) || `exit code ${result.code}` };
}

/**
 * Runs the launcher's probe with `python`, in the launcher's directory and without the `exclude` folders (the
 * workspace's) on sys.path, like the server will be started.
 */
export async function probeGradguard(python: string, launcher: string, exclude: readonly string[] = [], run: Runner = runProcess, env?: Env): Promise<Probe> {
  const args = [launcher, ...exclude.flatMap((f) => ["--exclude", f]), "--probe"];
  return parseProbe(await run(python, args, { cwd: safeCwd(launcher), env, timeoutMs: 60_000 }));
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
  /** client/launcher/launch.py: probes the venv, and its directory is where venv and pip run. */
  launcher: string;
  /** The workspace folders, kept off sys.path when probing. */
  exclude?: readonly string[];
  storageDir: string;
  extensionVersion: string;
  platform: NodeJS.Platform;
  /** The environment of the processes (processEnv); GRADGUARD_INSTALL_SPEC is read from it. */
  env: Env;
  exists: (p: string) => boolean;
  run?: Runner;
  /** Progress lines for the user (the output channel and the progress notification). */
  report: (message: string) => void;
}

/**
 * Returns the bundled venv's python and its probe, creating the venv and installing gradguard into it when needed.
 * `venv` and `pip` run isolated (`-I`): only the standard library and the venv's own packages, whatever
 * PYTHONPATH says (so pip sees what the isolated server will see).
 */
export async function ensureBundled(o: BundledOptions): Promise<{ python: string; probe: Probe }> {
  const run = o.run ?? runProcess;
  const cwd = safeCwd(o.launcher);
  const dir = bundledVenvDir(o.storageDir, o.extensionVersion);
  const python = venvPython(dir, o.platform);
  const env = o.env;
  if (o.exists(python)) {
    const probe = await probeGradguard(python, o.launcher, o.exclude, run, env);
    if (probe.installed) {
      return { python, probe };
    }
  } else {
    o.report(`Creating gradguard's private environment in ${dir} (first use only)...`);
    const made = await run(o.basePython, ["-I", "-m", "venv", dir], { cwd, env });
    if (made.code !== 0) {
      throw new Error(`'${o.basePython} -I -m venv ${dir}' failed: ${(made.stderr || made.error || "").trim()}`);
    }
  }
  const spec = installSpec(o.env, o.extensionVersion);
  o.report(`Installing ${spec} and its dependencies (libcst, pygls) into ${dir}...`);
  const pip = await run(python, ["-I", ...pipInstallArgs(spec)], { cwd, env });
  if (pip.code !== 0) {
    throw new Error(`'pip install ${spec}' into ${dir} failed:\n${(pip.stderr || pip.stdout || pip.error || "").trim()}`);
  }
  const probe = await probeGradguard(python, o.launcher, o.exclude, run, env);
  if (!probe.installed) {
    throw new Error(`gradguard is still not importable in ${dir}: ${probe.detail}`);
  }
  o.report(`gradguard ${probe.version} is ready in ${dir}.`);
  return { python, probe };
}
