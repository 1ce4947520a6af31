// The browser the tests drive: Debian's Chromium (or $CHROMIUM) through puppeteer-core, which
// downloads no browser. --no-sandbox because CI runs as root.
'use strict';

async function launchChromium(env) {
  const puppeteer = require('puppeteer-core');
  return puppeteer.launch({
    executablePath: env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
}

module.exports = { launchChromium };
