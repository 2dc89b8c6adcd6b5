/** S3 notifications and EventBridge events turned into ObjectChanges, and placed in their root; pure. */
import { changeFromS3Record, normalizeEventTime, parseNotification, placeChange } from '../../lambda/lib/notifications';
import { s3Event, s3EventRecord } from '../helpers/factories';

describe('parseNotification', () => {
  it('reads S3 records, decoding keys (+ as space, %2B as +, unicode), removals without size or eTag', () => {
    const event = s3Event([
      s3EventRecord({
        bucket: 'b',
        key: 'swamp/data/a b+c/ü 日本.txt',
        size: 12,
        etag: 'e1',
        sequencer: '0A',
        eventTime: '2026-07-01T00:00:00.000Z',
      }),
      s3EventRecord({ bucket: 'b', key: 'swamp/logs/x.log', kind: 'removed', sequencer: '0B' }),
    ]);

    const message = parseNotification(JSON.stringify(event));

    expect(message).toEqual({
      kind: 'changes',
      source: 's3',
      ignored: 0,
      changes: [
        {
          bucket: 'b',
          key: 'swamp/data/a b+c/ü 日本.txt',
          kind: 'created',
          size: 12,
          etag: 'e1',
          sequencer: '0A',
          eventTime: '2026-07-01T00:00:00.000Z',
        },
        {
          bucket: 'b',
          key: 'swamp/logs/x.log',
          kind: 'removed',
          size: undefined,
          etag: undefined,
          sequencer: '0B',
          eventTime: expect.any(String),
        },
      ],
    });
    expect(event.Records[0].s3.object.key).toBe('swamp/data/a+b%2Bc/%C3%BC+%E6%97%A5%E6%9C%AC.txt');
  });

  it('counts records of other kinds, and ones it cannot decode, as ignored', () => {
    const restore = s3EventRecord({ bucket: 'b', key: 'k', eventName: 'ObjectRestore:Completed' });
    const badKey = s3EventRecord({ bucket: 'b', key: 'k' });
    badKey.s3.object.key = '100%';
    const message = parseNotification({ Records: [restore, badKey, s3EventRecord({ bucket: 'b', key: 'ok' }), 'junk'] });
    expect(message).toMatchObject({ kind: 'changes', ignored: 3 });
    expect(message.kind === 'changes' && message.changes.map((c) => c.key)).toEqual(['ok']);
  });

  it('accepts event names with the s3: prefix', () => {
    const record = s3EventRecord({ bucket: 'b', key: 'k', eventName: 's3:ObjectRemoved:DeleteMarkerCreated', kind: 'removed' });
    expect(changeFromS3Record(record)).toMatchObject({ kind: 'removed', key: 'k' });
  });

  it('reads S3 EventBridge events', () => {
    const created = {
      source: 'aws.s3',
      'detail-type': 'Object Created',
      time: '2026-07-01T00:00:00Z',
      detail: { bucket: { name: 'b' }, object: { key: 'p/logs/a.log', size: 3, etag: 'e', sequencer: '01' } },
    };
    const deleted = {
      ...created,
      'detail-type': 'Object Deleted',
      detail: { bucket: { name: 'b' }, object: { key: 'p/logs/a.log', sequencer: '02' } },
    };
    expect(parseNotification(created)).toEqual({
      kind: 'changes',
      source: 'eventbridge',
      ignored: 0,
      changes: [
        { bucket: 'b', key: 'p/logs/a.log', kind: 'created', size: 3, etag: 'e', sequencer: '01', eventTime: '2026-07-01T00:00:00Z' },
      ],
    });
    expect(parseNotification(JSON.stringify(deleted))).toMatchObject({ kind: 'changes', changes: [{ kind: 'removed', size: undefined }] });
    expect(parseNotification({ ...created, 'detail-type': 'Object Tags Added' })).toMatchObject({
      kind: 'changes',
      changes: [],
      ignored: 1,
    });
  });

  it('takes an EventBridge key as sent, and keeps its decoded reading aside only when the two differ', () => {
    const event = (key: string) => ({
      source: 'aws.s3',
      'detail-type': 'Object Created',
      time: '2026-07-01T00:00:00Z',
      detail: { bucket: { name: 'b' }, object: { key, size: 1 } },
    });
    const changeOf = (key: string) => {
      const message = parseNotification(event(key));
      return message.kind === 'changes' ? message.changes[0] : undefined;
    };
    expect(changeOf('p/files/a+b %41.txt')).toMatchObject({ key: 'p/files/a+b %41.txt', otherReading: 'p/files/a b A.txt' });
    expect(changeOf('p/files/plain.txt')).not.toHaveProperty('otherReading');
    // Not valid URL encoding: only one reading.
    expect(changeOf('p/files/100%.txt')).toEqual(expect.objectContaining({ key: 'p/files/100%.txt' }));
    expect(changeOf('p/files/100%.txt')).not.toHaveProperty('otherReading');
  });

  it('recognises the S3 test event and refuses anything else', () => {
    expect(parseNotification('{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"b"}')).toEqual({ kind: 'test-event' });
    expect(parseNotification('not json')).toMatchObject({ kind: 'unknown', reason: expect.stringMatching(/not JSON/) });
    expect(parseNotification('[1]')).toMatchObject({ kind: 'unknown' });
    expect(parseNotification({ foo: 1 })).toMatchObject({ kind: 'unknown' });
  });
});

describe('normalizeEventTime', () => {
  it.each([
    ['2026-07-01T00:00:00.000Z', '2026-07-01T00:00:00.000Z'],
    ['2026-07-01T00:00:00.123456', '2026-07-01T00:00:00.123456Z'],
    ['2026-07-01T02:00:00+02:00', '2026-07-01T02:00:00+02:00'],
    [undefined, '1970-01-01T00:00:00.000Z'],
    ['', '1970-01-01T00:00:00.000Z'],
  ])('reads %j as %j', (time, iso) => {
    expect(normalizeEventTime(time)).toBe(iso);
  });
});

describe('placeChange', () => {
  const roots = [
    { bucket: 'b', prefix: 'swamp' },
    { bucket: 'b', prefix: 'other/deep' },
  ];

  it('places a key in the root whose prefix it is under, relative to it', () => {
    expect(placeChange({ bucket: 'b', key: 'swamp/data/a/b/c' }, 'b', roots)).toEqual({
      status: 'root',
      root: roots[0],
      rel: 'data/a/b/c',
    });
    expect(placeChange({ bucket: 'b', key: 'other/deep/ns1/logs/x' }, 'b', roots)).toEqual({
      status: 'root',
      root: roots[1],
      rel: 'ns1/logs/x',
    });
  });

  it('tells internal keys, other buckets and keys outside every root apart', () => {
    for (const key of [
      'swamp/.datastore-index.json',
      'swamp/.datastore.lock',
      'swamp/_control/x',
      'swamp/_index/_meta.json',
      'swamp/ns1/.namespace.json',
    ]) {
      expect(placeChange({ bucket: 'b', key }, 'b', roots).status).toBe('internal');
    }
    expect(placeChange({ bucket: 'a', key: 'swamp/data/x' }, 'b', roots)).toEqual({ status: 'foreign-bucket' });
    expect(placeChange({ bucket: 'b', key: 'swampy/data/x' }, 'b', roots)).toEqual({ status: 'outside-roots' });
    expect(placeChange({ bucket: 'b', key: 'swamp/' }, 'b', roots)).toEqual({ status: 'outside-roots' });
    expect(placeChange({ bucket: 'b', key: 'other/data' }, 'b', roots)).toEqual({ status: 'outside-roots' });
  });

  it('places every key of a bucket in a root without prefix', () => {
    expect(placeChange({ bucket: 'b', key: 'logs/x.log' }, 'b', [{ bucket: 'b', prefix: '' }])).toMatchObject({
      status: 'root',
      rel: 'logs/x.log',
    });
  });
});
