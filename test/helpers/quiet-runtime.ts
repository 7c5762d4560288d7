// Workers in tests log warnings and errors only: expected activity failures (declined cards, short
// stock) would otherwise flood the output. Runs once in each test process, before any worker starts.
import { DefaultLogger, Runtime } from '@temporalio/worker';

Runtime.install({ logger: new DefaultLogger('WARN') });
