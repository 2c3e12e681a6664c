import type { NextFunction, Request, RequestHandler, Response } from 'express';

// A surface that most processes never serve (the settings pages, Swagger UI, MCP) is loaded on
// its first request, not at start: its modules and their dependencies stay out of memory until
// then. A failed load is retried on the next request instead of being remembered.

export function lazyHandler(load: () => Promise<RequestHandler>): RequestHandler {
  let loading: Promise<RequestHandler> | undefined;
  return (req: Request, res: Response, next: NextFunction) => {
    if (!loading) {
      loading = load();
      loading.catch(() => {
        loading = undefined;
      });
    }
    loading.then((handler) => handler(req, res, next), next);
  };
}

/** lazyHandler for a router that matches full paths itself: loaded only for `prefix` and below. */
export function lazyUnder(prefix: string, load: () => Promise<RequestHandler>): RequestHandler {
  const handler = lazyHandler(load);
  return (req, res, next) =>
    req.path === prefix || req.path.startsWith(prefix + '/') ? handler(req, res, next) : next();
}
