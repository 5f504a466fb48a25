"""`--help` for the small entry points (predict, prepare, export_encoder): defaults shown."""

import argparse


class DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """Appends `(default: X)` to a flag's help, except where there is nothing to show (a required
    flag, no default, an off switch) or the help already says what the default is."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.required or action.default in (None, False) or "default" in text.lower():
            return text
        return super()._get_help_string(action)
