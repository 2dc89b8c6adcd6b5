import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { Code, Runtime } from 'aws-cdk-lib/aws-lambda';
import { OutputFormat, type BundlingOptions } from 'aws-cdk-lib/aws-lambda-nodejs';
import shared from '../bundling.json';

/**
 * The Lambda bundle's esbuild options, as written in `infra/bundling.json`.
 *
 * `scripts/bundle.mjs` (plain ESM, run by node) reads the same file, so `npm run bundle` and the
 * `NodejsFunction` asset come out of one definition and stay byte-identical.
 */
export interface LambdaBundleOptions {
  /** Handler entry, relative to the project root. */
  readonly entry: string;
  /** Where `npm run bundle` writes the bundle, relative to the project root. */
  readonly outfile: string;
  readonly platform: 'node';
  readonly format: 'cjs';
  /** esbuild target, `node<major>`; it also picks the Lambda runtime. */
  readonly target: string;
  readonly minify: boolean;
  /** Keep function and class names through minification, so stacks and logs stay readable. */
  readonly keepNames: boolean;
  readonly sourcemap: boolean;
  /**
   * Which `package.json` fields pick a package's entry, in order. The AWS SDK's ES modules come first: esbuild
   * can leave out what the handler never imports there, where a CommonJS entry brings every command's schema.
   */
  readonly mainFields: readonly string[];
  /**
   * Syntax esbuild may not emit, as its `supported` option. Those ES modules load some Node modules with
   * `import()`: written as `require`, the handler loads the same way in a CommonJS host (the tests' too).
   */
  readonly supported: Readonly<Record<string, boolean>>;
  /** Modules left out of the bundle; empty means the AWS SDK is bundled too. */
  readonly external: readonly string[];
}

/** The nearest folder at or above `dir` that holds a `package.json`. */
function packageRoot(dir: string): string {
  for (let d = dir; ; d = path.dirname(d)) {
    if (existsSync(path.join(d, 'package.json'))) return d;
    if (path.dirname(d) === d) throw new Error(`no package.json above ${dir}`);
  }
}

/**
 * The project root: the folder that holds `package.json` and `infra/`; in a clone this file runs
 * from `infra/private/`, in the installed package from `dist/js/infra/private/`.
 */
export const PROJECT_ROOT = packageRoot(path.join(__dirname, '..'));

/** Runtimes we accept, keyed by the esbuild target they match. */
const RUNTIME_BY_TARGET: Readonly<Record<string, Runtime>> = {
  node22: Runtime.NODEJS_22_X,
  node24: Runtime.NODEJS_24_X,
};

/** Checks the JSON's shape once, so a typo there fails at synth time with the file's name. */
function parse(raw: unknown): LambdaBundleOptions {
  const where = 'infra/bundling.json';
  if (typeof raw !== 'object' || raw === null) throw new Error(`${where} must hold a JSON object`);
  const o = raw as Record<string, unknown>;
  const str = (k: string): string => {
    if (typeof o[k] !== 'string' || o[k] === '') throw new Error(`${where}: "${k}" must be a non-empty string`);
    return o[k] as string;
  };
  const bool = (k: string): boolean => {
    if (typeof o[k] !== 'boolean') throw new Error(`${where}: "${k}" must be true or false`);
    return o[k] as boolean;
  };
  // CDK names an ESM bundle index.mjs while scripts/bundle.mjs writes index.js: only CJS keeps them equal.
  if (o.format !== 'cjs') throw new Error(`${where}: "format" must be "cjs"`);
  if (o.platform !== 'node') throw new Error(`${where}: "platform" must be "node"`);
  const names = (k: string, what: string): string[] => {
    const v = o[k];
    if (!Array.isArray(v) || !v.every((e) => typeof e === 'string')) throw new Error(`${where}: "${k}" must be an array of ${what}`);
    return v as string[];
  };
  const supported = o.supported;
  if (typeof supported !== 'object' || supported === null || !Object.values(supported).every((v) => typeof v === 'boolean')) {
    throw new Error(`${where}: "supported" must map esbuild feature names to true or false`);
  }
  const target = str('target');
  if (!(target in RUNTIME_BY_TARGET)) {
    throw new Error(`${where}: "target" ${target} has no Lambda runtime here; use one of ${Object.keys(RUNTIME_BY_TARGET).join(', ')}`);
  }
  return {
    entry: str('entry'),
    outfile: str('outfile'),
    platform: 'node',
    format: 'cjs',
    target,
    minify: bool('minify'),
    keepNames: bool('keepNames'),
    sourcemap: bool('sourcemap'),
    mainFields: names('mainFields', 'package.json field names'),
    supported: supported as Record<string, boolean>,
    external: names('external', 'module names'),
  };
}

/** The shared options, checked. */
export const LAMBDA_BUNDLE: LambdaBundleOptions = parse(shared);

/** The Lambda runtime that matches the bundle's esbuild target. */
export const LAMBDA_RUNTIME: Runtime = RUNTIME_BY_TARGET[LAMBDA_BUNDLE.target];

/** The handler entry `npm run bundle` builds, as an absolute path. */
export const DEFAULT_ENTRY = path.join(PROJECT_ROOT, LAMBDA_BUNDLE.entry);

/**
 * The same options in the words of `NodejsFunction`.
 *
 * Local esbuild only: Docker is never used (it is not on every machine, and a Docker build would
 * be a second toolchain whose output could differ from `npm run bundle`).
 */
export function nodejsBundling(options: LambdaBundleOptions = LAMBDA_BUNDLE): BundlingOptions {
  return {
    forceDockerBundling: false,
    format: OutputFormat.CJS,
    target: options.target,
    minify: options.minify,
    keepNames: options.keepNames,
    sourceMap: options.sourcemap,
    mainFields: [...options.mainFields],
    esbuildArgs: Object.fromEntries(Object.entries(options.supported).map(([feature, on]) => [`--supported:${feature}`, String(on)])),
    // An explicit list, even empty, replaces CDK's default of leaving @aws-sdk/* to the runtime.
    externalModules: [...options.external],
  };
}

/**
 * Whether this file runs from the TypeScript sources (a clone, through tsx or ts-jest) rather than
 * compiled from the installed package, which ships the built bundle and no handler sources.
 */
export const FROM_SOURCES = path.extname(__filename) === '.ts';

/**
 * Context key (`true`, or `-c datastore-indexer:builtBundle=true`): even from the sources, the function's
 * code is the built bundle of `npm run bundle`, as the installed package deploys it, instead of a local
 * esbuild run. Its asset hash then depends on the bundle alone, not on where the cloud assembly is written
 * (the deploy test's snapshot relies on that).
 */
export const BUILT_BUNDLE_CONTEXT = 'datastore-indexer:builtBundle';

/** The folder of the built bundle (`index.js` and its source map), as the package ships it. */
export const SHIPPED_BUNDLE_DIR = path.join(PROJECT_ROOT, path.dirname(LAMBDA_BUNDLE.outfile));

/**
 * The function's code when it is not bundled from sources: the package's own built bundle, used as
 * it is, so an app that installs the package needs neither esbuild nor Docker to synthesise.
 */
export function shippedBundleCode(dir: string = SHIPPED_BUNDLE_DIR): Code {
  const file = path.join(dir, path.basename(LAMBDA_BUNDLE.outfile));
  if (!existsSync(file)) {
    throw new Error(`The indexer's Lambda bundle ${file} is missing: reinstall the package, or run \`npm run build\` in a clone`);
  }
  return Code.fromAsset(dir);
}
