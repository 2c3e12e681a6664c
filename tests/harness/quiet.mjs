// Tests print warnings and errors of the server, not one line per request.
process.env.LOG_LEVEL ||= 'warn';
