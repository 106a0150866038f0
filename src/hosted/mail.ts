// Sign-in mail. With --smtp-url it goes out over SMTP (nodemailer); without, the link is written
// to the log at info level — for development only, and serve says so at start.
import nodemailer from 'nodemailer';
import type { Logger } from '../log.ts';
import { ConfigError } from '../config.ts';
import { redactDatabaseUrl } from '../store/database/postgres.ts';

export interface Mailer {
  sendSigninLink(to: string, link: string): Promise<void>;
}

export function createMailer(opts: { smtpUrl?: string; mailFrom: string }, log: Logger): Mailer {
  if (!opts.smtpUrl) {
    log.warn('hosted mode without --smtp-url: sign-in links are written to the log (development only)');
    return {
      sendSigninLink(_to, link) {
        log.info({ signinLink: link }, 'sign-in link (no SMTP configured)');
        return Promise.resolve();
      },
    };
  }
  let transport: ReturnType<typeof nodemailer.createTransport>;
  try {
    transport = nodemailer.createTransport(opts.smtpUrl);
  } catch {
    // parseRelayConfig (src/config.ts) refuses what is not an smtp(s) URL; should nodemailer still
    // refuse one, its words may quote the URL, password and all: they stay out (exit 2).
    throw new ConfigError(`--smtp-url ${redactDatabaseUrl(opts.smtpUrl)}: the mail library cannot use it`);
  }
  return {
    async sendSigninLink(to, link) {
      await transport.sendMail({
        from: opts.mailFrom,
        to,
        subject: 'Sign in to phonebridge',
        text: `Open this link to sign in (valid 15 minutes, once):\n\n${link}\n\nIf you did not ask for it, ignore this mail.`,
      });
    },
  };
}
