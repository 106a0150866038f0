// Sign-in mail. With --smtp-url it goes out over SMTP (nodemailer); without, the link is written
// to the log at info level — for development only, and serve says so at start.
import nodemailer from 'nodemailer';
import type { Logger } from '../log.ts';

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
  const transport = nodemailer.createTransport(opts.smtpUrl);
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
