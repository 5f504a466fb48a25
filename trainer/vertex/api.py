"""Calling Google Cloud: credentials, and API failures as one line a user can act on.

Exit codes follow README's table: what the user can fix (no or rejected credentials, a request
Vertex AI refuses with a 4xx: permission, quota, a missing resource) is a UserError, exit 2
like every bad input; what only a retry can fix (Vertex AI's own 5xx, an unreachable network)
or a job that ran and failed is a CloudError, exit 1.
"""

import contextlib

from trainer.errors import UserError


class CloudError(UserError):
    """Google Cloud failed or could not be reached, or the job failed there; exit code 1 (the
    command was fine: retry, or read the job's logs)."""

    exit_code = 1


def credentials(dry_run: bool):
    """Anonymous credentials for a dry run, which assembles requests offline and sends nothing;
    None (Application Default Credentials) otherwise."""
    if not dry_run:
        return None
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


@contextlib.contextmanager
def google_errors():
    """Turns google-auth and API-core exceptions into one line: a UserError for what the user
    can fix, a CloudError for what only a retry can."""
    from google.api_core import exceptions as api_exceptions
    from google.auth import exceptions as auth_exceptions

    try:
        yield
    except auth_exceptions.DefaultCredentialsError:
        raise UserError(
            "no Google Cloud credentials found. Run `gcloud auth application-default "
            "login` (or point GOOGLE_APPLICATION_CREDENTIALS at a service-account key) "
            "and retry; --dry-run prints the request without credentials."
        ) from None
    except auth_exceptions.TransportError as e:
        raise CloudError(f"cannot reach Google Cloud to authenticate: {e}") from None
    except auth_exceptions.GoogleAuthError as e:
        raise UserError(f"Google Cloud rejected the credentials: {e}") from None
    except api_exceptions.GoogleAPICallError as e:
        fixable = e.code is not None and 400 <= int(e.code) < 500
        raise (UserError if fixable else CloudError)(f"Vertex AI refused the request ({e.code}): {e.message}") from None
