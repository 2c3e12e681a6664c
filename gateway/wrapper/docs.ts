import { Router, type RequestHandler } from 'express';
import { lazyHandler } from '../lazy.js';

// GET /api/v1/docs: the human-readable reference, rendered by Swagger UI from the live
// /api/v1/openapi.json. swagger-ui-express serves swagger-ui-dist's assets from node_modules
// itself, so the page works offline (no CDN). The page loads the document by a path relative
// to itself, so it also works behind a proxy that adds a prefix. Swagger UI is loaded on the
// first visit of the page, not at start.

export function docsRouter(documentPath: string): Router {
  const relative = `../${documentPath.split('/').pop()!}`;
  const options = {
    swaggerUrl: relative,
    customSiteTitle: 'Tally API v1',
    swaggerOptions: { persistAuthorization: true },
  };
  // Relative asset URLs (./swagger-ui.css) need the trailing slash.
  const slash: RequestHandler = (req, res, next) => {
    const [path = ''] = req.originalUrl.split('?');
    if (req.path === '/' && !path.endsWith('/')) return res.redirect(301, `${req.baseUrl}/`);
    next();
  };
  const swagger = lazyHandler(async () => {
    const { default: swaggerUi } = await import('swagger-ui-express');
    const handlers = [
      ...(swaggerUi.serveFiles(undefined, options) as RequestHandler[]),
      swaggerUi.setup(undefined, options) as RequestHandler,
    ];
    // The handlers in turn, as express would run them.
    return (req, res, next) => {
      const run = (i: number, err?: unknown): void => {
        if (err !== undefined && err !== null) return next(err);
        const handler = handlers[i];
        if (handler === undefined) return next();
        handler(req, res, (e?: unknown) => run(i + 1, e));
      };
      run(0);
    };
  });
  return Router().use(slash, swagger);
}
