import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { RequestListener } from 'node:http';
import { writeError } from './error-response.js';

// A surface that most processes never serve (the settings pages, Swagger UI, MCP) is loaded on
// its first request, not at start: its modules and their dependencies stay out of memory until
// then. A failed load is retried on the next request instead of being remembered.

/** `load` run on the first call and its promise shared by the calls after; run again after a failure. */
function loadOnce<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => {
    if (!loading) {
      loading = load();
      loading.catch(() => {
        loading = undefined;
      });
    }
    return loading;
  };
}

export function lazyHandler(load: () => Promise<RequestHandler>): RequestHandler {
  const loaded = loadOnce(load);
  return (req: Request, res: Response, next: NextFunction) => {
    loaded().then((handler) => handler(req, res, next), next);
  };
}

/** lazyHandler for a plain node:http listener (server.ts): a failed load is answered in the error shape. */
export function lazyListener(load: () => Promise<RequestListener>): RequestListener {
  const loaded = loadOnce(load);
  return (req, res) => {
    loaded().then(
      (listener) => listener(req, res),
      (err: unknown) => writeError(res, err),
    );
  };
}
