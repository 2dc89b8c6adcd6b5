/**
 * The S3 model as a child process of the benchmark (`bench/model.ts` starts it), so that the model's
 * work and the client's never share one CPU thread. Answers requests from its parent over IPC.
 */
import { startS3Model } from '../support/s3-model/server';
import type { HostRequest, HostReply } from './model';

async function main(): Promise<void> {
  const model = await startS3Model({ latencyMs: Number(process.argv[2] ?? 30) });
  const send = (reply: HostReply): void => void process.send?.(reply);
  process.on('message', (request: HostRequest) => {
    try {
      switch (request.op) {
        case 'seed':
          send({ id: request.id, result: model.seed(request.bucket, request.options) });
          break;
        case 'counts':
          send({ id: request.id, result: model.requestCounts() });
          break;
        case 'cpu': {
          const { user, system } = process.cpuUsage();
          send({ id: request.id, result: (user + system) / 1000 });
          break;
        }
        case 'reset':
          model.resetCounts();
          send({ id: request.id, result: null });
          break;
        case 'stop':
          void model.stop().finally(() => {
            send({ id: request.id, result: null });
            process.exit(0);
          });
          break;
      }
    } catch (err) {
      send({ id: request.id, error: err instanceof Error ? err.message : String(err) });
    }
  });
  send({ id: 0, result: { endpoint: model.endpoint } });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
