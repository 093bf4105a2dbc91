// The Express application: /healthz, /readyz and /metrics here; /api/v1 and /admin/v1 are added
// by their feature modules.
import express from 'express';
import type { Health } from '../../common/src/health.ts';

export interface AppDeps {
  health: Health;
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.use((req, res, next) => {
    if (!deps.health.handle(req, res)) next();
  });
  app.use((_req, res) => {
    res.status(404).json({ success: false, error: 'Not found' });
  });
  return app;
}
