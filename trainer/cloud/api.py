"""Calling Google Cloud: credentials, and API failures as one line a user can act on."""
import contextlib

from trainer.errors import UserError


class CloudError(UserError):
    """Google Cloud refused or could not be reached; exit code 1 (the request was fine)."""

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
    """Turns google-auth and API-core exceptions into a CloudError naming what to do."""
    from google.api_core import exceptions as api_exceptions
    from google.auth import exceptions as auth_exceptions

    try:
        yield
    except auth_exceptions.DefaultCredentialsError:
        raise CloudError("no Google Cloud credentials found. Run `gcloud auth application-default "
                         "login` (or point GOOGLE_APPLICATION_CREDENTIALS at a service-account key) "
                         "and retry; --dry-run prints the request without credentials.") from None
    except auth_exceptions.GoogleAuthError as e:
        raise CloudError(f"Google Cloud rejected the credentials: {e}") from None
    except api_exceptions.GoogleAPICallError as e:
        raise CloudError(f"Vertex AI refused the request ({e.code}): {e.message}") from None
