// Where the gradguard package comes from (`gradguard.importStrategy`).
//
// useBundled (default): the server shipped in the VSIX, `bundled/libs` (gradguard and its pure-Python
//   dependencies, built by client/bundle/build.py), run by the user's interpreter (any Python >= 3.10).  The
//   launcher puts that directory first on sys.path; nothing is installed into the user's environment.  libcst, the
//   one compiled dependency of the package, is not bundled: the server and its fixes run without it.
// fromEnvironment: gradguard installed in the selected interpreter, else the bundled one.
//
// Every process started here runs in a directory outside the workspace (the launcher's, client/launcher/): a
// `python -m`/`-c` puts its working directory first on sys.path, and the workspace's files must never be imported.
//
// No `vscode` import: processes are started through an injected runner, so this is unit-tested.

import * as path from "path";
import { execFile } from "child_process";

import { LAUNCH_FLAGS, isInside } from "./interpreter";
import { ImportStrategy } from "./settings";

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
  /** Where gradguard comes from: the extension's bundled/libs or the interpreter's environment. */
  source?: "bundled" | "environment";
  /** The directory of the gradguard package that was found. */
  location?: string;
  /** The interpreter is older than the server supports (3.10). */
  tooOld?: boolean;
  detail: string;
}

/** Parses what `python launch.py --probe` prints: `python:`, `flags:`, `source:`, then `gradguard:<version>` and `location:`, or `missing:<why>`. */
export function parseProbe(result: RunResult): Probe {
  const lines = result.stdout.split(/\r?\n/);
  const value = (key: string) => lines.find((l) => l.startsWith(`${key}:`))?.slice(key.length + 1).trim();
  const flags = (value("flags") ?? "").split(/\s+/).filter((f) => LAUNCH_FLAGS.includes(f));
  const python = value("python");
  const src = value("source");
  const source = src === "bundled" || src === "environment" ? src : undefined;
  const version = value("gradguard");
  if (result.code === 0 && version !== undefined) {
    return { installed: true, version, flags, python, source, location: value("location"), detail: `gradguard:${version}` };
  }
  const missing = value("missing");
  if (missing !== undefined) {
    return { installed: false, flags, python, source, tooOld: /too old/.test(missing), detail: missing };
  }
  return { installed: false, flags, python, source, detail: (result.error ?? result.stderr.trim()) || `exit code ${result.code}` };
}

/** The bundled server inside the installed extension (absent in a build without `npm run bundle:server`). */
export function bundledLibsPath(extensionRoot: string): string {
  return path.join(extensionRoot, "bundled", "libs");
}

/**
 * The launcher arguments that choose the server: `--libs DIR` (useBundled) or `--fallback-libs DIR`
 * (fromEnvironment: the environment's gradguard when importable, else DIR); none without a bundle.
 */
export function libsArgs(strategy: ImportStrategy, libs: string | undefined): string[] {
  if (!libs) {
    return [];
  }
  return strategy === "useBundled" ? ["--libs", libs] : ["--fallback-libs", libs];
}

/**
 * Runs the launcher's probe with `python`, in the launcher's directory and without the `exclude` folders (the
 * workspace's) on sys.path, like the server will be started; `libs` are the bundle arguments (libsArgs).
 */
export async function probeGradguard(python: string, launcher: string, exclude: readonly string[] = [], run: Runner = runProcess, env?: Env, libs: readonly string[] = []): Promise<Probe> {
  const args = [launcher, ...libs, ...exclude.flatMap((f) => ["--exclude", f]), "--probe"];
  return parseProbe(await run(python, args, { cwd: safeCwd(launcher), env, timeoutMs: 60_000 }));
}
