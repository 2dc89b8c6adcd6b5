/** Which top-level folders of a root are namespaces, asked of S3 once per folder (`namespaceExists`) and remembered. */
import { topFolder } from './keys';
import { namespaceExists } from './list';
import type { DatastoreRoot } from './scope';
import type { S3Store } from './s3';

/** A root-relative key placed in its scope: the namespace it belongs to (if any) and the key relative to that scope. */
export interface ScopedKey {
  readonly namespace?: string;
  readonly rel: string;
}

/**
 * Tells whether a top-level folder is a namespace (it holds `<root>/<top>/.namespace.json`), asking S3
 * once per folder for the life of the resolver (make one per invocation: namespaces can appear).
 *
 * @example
 * const namespaces = new NamespaceResolver(store, root);
 * const { namespace, rel } = await namespaces.scopeOf('team-a/data/x/1/raw'); // namespace 'team-a' if it has a marker
 */
export class NamespaceResolver {
  private readonly known = new Map<string, Promise<boolean>>();

  constructor(
    private readonly store: S3Store,
    readonly root: DatastoreRoot,
  ) {}

  /** Records what is already known (e.g. from a marker's create event), saving the request. */
  note(top: string, isNamespace: boolean): void {
    this.known.set(top, Promise.resolve(isNamespace));
  }

  /** True when `<root>/<top>/.namespace.json` exists. */
  isNamespace(top: string): Promise<boolean> {
    let answer = this.known.get(top);
    if (!answer) {
      answer = namespaceExists(this.store, this.root, top);
      // A failed request is not remembered: the next caller asks again.
      answer.catch(() => this.known.delete(top));
      this.known.set(top, answer);
    }
    return answer;
  }

  /** The scope a root-relative key belongs to. */
  async scopeOf(rel: string): Promise<ScopedKey> {
    const top = topFolder(rel);
    if (top !== undefined && (await this.isNamespace(top))) return { namespace: top, rel: rel.slice(top.length + 1) };
    return { rel };
  }
}
