/**
 * The words and JSON of `datastore-indexer`: pure functions from library reports to output.
 * One vocabulary everywhere: a heal has `added`, `removed` and `resized` entries; a check finds
 * `missing`, `stale` and `resized` ones; a hydrate has `pulled`, `present` and `refused` keys.
 */
import {
  ArchivedObjectError,
  type HealAndHydrateReport,
  type HealReport,
  IndexerError,
  hasDrift,
  type ResizedEntry,
  type ScopeReport,
} from '../../lambda/lib';

/** `1 file`, `2 files`. */
export function plural(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

/** Bytes in decimal units, one decimal: `512 B`, `1.2 MB`. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Entries the index held before the heal (a heal adds `missing` and removes `stale`). */
export function entriesBefore(scope: ScopeReport): number {
  return scope.indexState === 'valid' ? scope.entries - scope.drift.missing + scope.drift.stale : 0;
}

function healCounts(added: number, removed: number, resized: number): string {
  return `+${added} added, -${removed} removed, ~${resized} resized`;
}

function stateBefore(scope: ScopeReport, bucket: string): string {
  if (scope.indexState === 'absent') return ' (index was absent)';
  if (scope.indexState === 'unreadable') {
    const copy = scope.keptCopy ? `; copy kept at s3://${bucket}/${scope.keptCopy}` : '';
    return ` (index was unreadable: ${scope.unreadableReason}${copy})`;
  }
  return '';
}

/** What a repair did to one index, without the final period. */
export function healClause(scope: ScopeReport, bucket: string): string {
  let text: string;
  if (scope.published) {
    const d = scope.drift;
    text = `Healed ${scope.scope}${stateBefore(scope, bucket)}: ${healCounts(d.missing, d.stale, d.resized)} (index ${plural(scope.entries, 'entry', 'entries')})`;
  } else if (!hasDrift(scope)) {
    text = `Index ${scope.scope} is true (${plural(scope.entries, 'entry', 'entries')})`;
  } else {
    text = `Index ${scope.scope} was healed by another writer meanwhile (${plural(scope.entries, 'entry', 'entries')})`;
  }
  if (scope.held)
    text = `Left ${scope.scope} as it is: ${scope.held}${scope.keptCopy ? `; copy kept at s3://${bucket}/${scope.keptCopy}` : ''}`;
  else if (scope.pending && scope.published) text += ` (${scope.pending}: finished)`;
  if (scope.unshardable > 0) text += `; ${plural(scope.unshardable, 'key')} left out (no shard partition)`;
  if (scope.refused > 0) text += `; ${plural(scope.refused, 'key')} refused (clients cannot store them)`;
  if (scope.mirrorFailures > 0) text += `; ${plural(scope.mirrorFailures, 'mirror partition file')} not refreshed`;
  return text;
}

/** `repair`: one line per index. */
export function repairLines(report: HealReport): string[] {
  return report.scopes.map((s) => `${healClause(s, report.root.bucket)}${s.published ? '' : '; nothing published'}.`);
}

/** `hydrate`: the one summary line. */
export function hydrateLine(result: HealAndHydrateReport): string {
  const { heal, scope, hydrate } = result;
  const parts = [`${healClause(scope, heal.root.bucket)}.`];
  const others = heal.scopes.filter((s) => s !== scope && s.published);
  if (others.length > 0) {
    const sum = (pick: (s: ScopeReport) => number): number => others.reduce((n, s) => n + pick(s), 0);
    const counts = healCounts(
      sum((s) => s.drift.missing),
      sum((s) => s.drift.stale),
      sum((s) => s.drift.resized),
    );
    parts.push(`Also healed ${plural(others.length, 'other index', 'other indexes')} (${counts}).`);
  }
  parts.push(`Pulled ${plural(hydrate.pulled, 'file')} (${formatBytes(hydrate.bytes)}), ${hydrate.present} already present.`);
  const refused = refusedKeysOf(result).length;
  if (refused > 0) parts.push(`Refused ${plural(refused, 'key')} clients cannot store.`);
  if (hydrate.archived.length > 0)
    parts.push(`Left ${plural(hydrate.archived.length, 'archived file')} in S3 (restore them, then run again).`);
  if (hydrate.failed.length > 0) parts.push(`Failed to pull ${plural(hydrate.failed.length, 'file')}.`);
  return parts.join(' ');
}

function describeState(scope: ScopeReport): string {
  if (scope.held) return `index unreadable, left as it is (${scope.held})`;
  if (scope.indexState === 'absent') return 'index absent';
  if (scope.indexState === 'unreadable') return `index unreadable (${scope.unreadableReason})`;
  return `index of ${plural(entriesBefore(scope), 'entry', 'entries')}`;
}

/** A key as printed: quoted and escaped (as hydrate's warnings are) when it holds control characters, so no key can drive the terminal. */
export function shownKey(key: string): string {
  return /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(key) ? JSON.stringify(key) : key;
}

function resizedText(r: ResizedEntry): string {
  return `${shownKey(r.key)} (index ${r.indexSize} B, object ${r.objectSize} B)`;
}

/** `check`: per index a status line and up to `maxKeys` keys of each kind, then a closing line. */
export function checkLines(report: HealReport, maxKeys: number): string[] {
  const lines: string[] = [];
  for (const scope of report.scopes) {
    const { missing, stale, resized } = scope.drift;
    const shards = scope.layout === 'monolith' ? '' : `, ${scope.layout}`;
    const refused = scope.refused > 0 ? `; ${scope.refused} refused` : '';
    if (!hasDrift(scope)) {
      lines.push(`${scope.scope}: index true (${plural(scope.entries, 'entry', 'entries')}${shards})${refused}`);
    } else {
      const pending = scope.pending ? `; ${scope.pending}` : '';
      lines.push(
        `${scope.scope}: ${describeState(scope)}${shards}; ${plural(scope.objects, 'object')}; ${missing} missing, ${stale} stale, ${resized} resized${refused}${pending}`,
      );
    }
    // The report names the first keys of each kind only; the counts are whole.
    const kinds: [string, string[], number][] = [
      ['missing', scope.driftKeys.missing.map(shownKey), missing],
      ['stale', scope.driftKeys.stale.map(shownKey), stale],
      ['resized', scope.driftKeys.resized.map(resizedText), resized],
      ['refused', scope.refusedKeys.map(shownKey), scope.refused],
    ];
    for (const [kind, keys, count] of kinds) {
      for (const key of keys.slice(0, maxKeys)) lines.push(`  ${kind.padEnd(7)}  ${key}`);
      if (maxKeys > 0 && count > maxKeys) lines.push(`  … ${count - maxKeys} more ${kind}`);
    }
  }
  const drifted = report.scopes.filter(hasDrift).length;
  const total = report.scopes.length;
  // `repair` refuses an empty prefix, so it is not offered as the cure there.
  const cure = report.empty ?? '`datastore-indexer repair` heals it';
  lines.push(
    drifted === 0
      ? `${total === 1 ? 'The index is' : `All ${total} indexes are`} true; nothing published.`
      : `Drift in ${drifted} of ${plural(total, 'index', 'indexes')}; nothing published (${cure}).`,
  );
  return lines;
}

/** One index in a JSON report of a `repair` or `hydrate`. */
export interface HealedIndexJson {
  readonly scope: string;
  readonly namespace: string | null;
  readonly layout: string;
  /** The index's state before the heal: `absent`, `unreadable` or `valid`. */
  readonly before: string;
  readonly unreadableReason: string | null;
  readonly keptCopy: string | null;
  readonly published: boolean;
  /** True when the index had drifted but another writer healed it before this run could (nothing published). */
  readonly healedByAnotherWriter: boolean;
  /** Entries this run added, removed and resized: 0 when it published nothing. */
  readonly added: number;
  readonly removed: number;
  readonly resized: number;
  readonly unshardable: number;
  /** Keys clients refuse, left out of (or removed from) the index. */
  readonly refused: number;
  /** Why the layout needed a write although its entries were true. */
  readonly pending: string | null;
  /** Why the scope was left as it is. */
  readonly held: string | null;
  /** Partitions whose dual-write mirror file differed from the monolith. */
  readonly staleMirrors: string[];
  readonly mirrorFailures: number;
  readonly objects: number;
  /** Entries of the index as it stands after the run. */
  readonly entries: number;
}

/** One index in a JSON report of a `check`. */
export interface CheckedIndexJson {
  readonly scope: string;
  readonly namespace: string | null;
  readonly layout: string;
  readonly state: string;
  readonly unreadableReason: string | null;
  readonly drift: boolean;
  readonly objects: number;
  /** Entries the index holds now. */
  readonly entries: number;
  readonly missing: number;
  readonly stale: number;
  readonly resized: number;
  readonly unshardable: number;
  /** Keys clients refuse (in the listing or the index): never indexed. */
  readonly refused: number;
  readonly pending: string | null;
  readonly held: string | null;
  /** Partitions whose dual-write mirror file differs from the monolith. */
  readonly staleMirrors: string[];
  /** Up to `--keys` keys of each kind. */
  readonly keys: { missing: string[]; stale: string[]; resized: ResizedEntry[]; refused: string[] };
}

/** The JSON of one healed index. */
export function healedIndexJson(scope: ScopeReport): HealedIndexJson {
  return {
    scope: scope.scope,
    namespace: scope.namespace ?? null,
    layout: scope.layout,
    before: scope.indexState,
    unreadableReason: scope.unreadableReason ?? null,
    keptCopy: scope.keptCopy ?? null,
    published: scope.published,
    healedByAnotherWriter: !scope.published && hasDrift(scope),
    added: scope.published ? scope.drift.missing : 0,
    removed: scope.published ? scope.drift.stale : 0,
    resized: scope.published ? scope.drift.resized : 0,
    unshardable: scope.unshardable,
    refused: scope.refused,
    pending: scope.pending ?? null,
    held: scope.held ?? null,
    staleMirrors: scope.staleMirrors,
    mirrorFailures: scope.mirrorFailures,
    objects: scope.objects,
    entries: scope.entries,
  };
}

/** The JSON of one checked index. */
export function checkedIndexJson(scope: ScopeReport, maxKeys: number): CheckedIndexJson {
  return {
    scope: scope.scope,
    namespace: scope.namespace ?? null,
    layout: scope.layout,
    state: scope.indexState,
    unreadableReason: scope.unreadableReason ?? null,
    drift: hasDrift(scope),
    objects: scope.objects,
    entries: entriesBefore(scope),
    missing: scope.drift.missing,
    stale: scope.drift.stale,
    resized: scope.drift.resized,
    unshardable: scope.unshardable,
    refused: scope.refused,
    pending: scope.pending ?? null,
    held: scope.held ?? null,
    staleMirrors: scope.staleMirrors,
    keys: {
      missing: scope.driftKeys.missing.slice(0, maxKeys),
      stale: scope.driftKeys.stale.slice(0, maxKeys),
      resized: scope.driftKeys.resized.slice(0, maxKeys),
      refused: scope.refusedKeys.slice(0, maxKeys),
    },
  };
}

const seconds = (ms: number): number => Math.round(ms) / 1000;

/** The `check --json` report. */
export function checkJson(report: HealReport, maxKeys: number, elapsedMs: number): object {
  const indexes = report.scopes.map((s) => checkedIndexJson(s, maxKeys));
  return { command: 'check', root: rootName(report), drift: indexes.some((i) => i.drift), indexes, seconds: seconds(elapsedMs) };
}

/** The `repair --json` report. */
export function repairJson(report: HealReport, elapsedMs: number): object {
  const indexes = report.scopes.map(healedIndexJson);
  return { command: 'repair', root: rootName(report), published: indexes.some((i) => i.published), indexes, seconds: seconds(elapsedMs) };
}

/** Warnings of a hydrate's archived keys: one per key, and how to restore them (keys being restored need only time). */
export function archivedLines(result: HealAndHydrateReport): { keys: string[]; restore?: string } {
  const { archived } = result.hydrate;
  const bucket = result.heal.root.bucket;
  const base = `${result.heal.root.prefix ? `${result.heal.root.prefix}/` : ''}${result.scope.namespace ? `${result.scope.namespace}/` : ''}`;
  const keys = archived.map(
    (a) =>
      `archived: ${JSON.stringify(a.key)} is in ${a.storageClass ?? 'an archive storage class'}${a.restoring ? ', its restore under way' : ''}; S3 serves it only once restored, to this command and to swamp clients alike`,
  );
  const waiting = archived.filter((a) => !a.restoring);
  if (waiting.length === 0) return { keys };
  const others = waiting.length > 1 ? ` (and likewise for the ${plural(waiting.length - 1, 'other')})` : '';
  return {
    keys,
    restore: `restore the archived files, then run again: ${ArchivedObjectError.restoreCommand(bucket, `${base}${waiting[0].key}`)}${others}`,
  };
}

/** The keys a hydrate left out, sorted: those clients refuse (left out of the index) and those outside the cache folder. */
export function refusedKeysOf(result: HealAndHydrateReport): string[] {
  return [...new Set([...result.scope.refusedKeys, ...result.hydrate.refused])].sort();
}

/** The `hydrate --json` report. */
export function hydrateJson(result: HealAndHydrateReport, cacheDir: string, elapsedMs: number): object {
  const { heal, scope, hydrate } = result;
  return {
    command: 'hydrate',
    ok: hydrate.failed.length === 0 && hydrate.archived.length === 0,
    root: rootName(heal),
    scope: scope.scope,
    cache: cacheDir,
    index: healedIndexJson(scope),
    indexes: heal.scopes.map(healedIndexJson),
    pulled: hydrate.pulled,
    present: hydrate.present,
    bytes: hydrate.bytes,
    refused: refusedKeysOf(result),
    failed: hydrate.failed,
    archived: hydrate.archived,
    seconds: seconds(elapsedMs),
  };
}

function rootName(report: HealReport): string {
  return `s3://${report.root.bucket}/${report.root.prefix}`;
}

/** The `--json` report of a failed command: `{error: {name, message, hint}}`, the hint apart from the message. */
export function errorJson(err: unknown): { error: { name: string; message: string; hint: string | null } } {
  if (!(err instanceof Error)) return { error: { name: 'Error', message: String(err), hint: null } };
  const hint = err instanceof IndexerError && err.hint ? err.hint : null;
  const message = hint && err.message.endsWith(`. ${hint}`) ? err.message.slice(0, -hint.length - 2) : err.message;
  return { error: { name: err.name, message, hint } };
}

/** An error's stack and, indented below it, each cause's (the SDK's own error included). */
export function debugText(err: unknown): string {
  const lines: string[] = [];
  let current: unknown = err;
  for (let depth = 0; current !== undefined && depth < 8; depth++) {
    const text = current instanceof Error ? (current.stack ?? `${current.name}: ${current.message}`) : String(current);
    const indent = '  '.repeat(depth);
    lines.push(depth === 0 ? text : `${indent}Caused by: ${text}`.replace(/\n/g, `\n${indent}`));
    current = current instanceof Error ? current.cause : undefined;
  }
  return lines.join('\n');
}
