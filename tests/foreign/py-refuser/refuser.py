"""A 0.2.0 hook in Python that overrides only before_execute, as a newcomer would write
one: it refuses a call whose arguments say "forbidden", and lets every other through;
its after_execute is the SDK's PassThrough's."""

from hookhost_sdk import PassThrough, refuse


class ToolHook(PassThrough):
    def before_execute(self, ctx, call):
        if "forbidden" in call.arguments:
            refuse("refused: the arguments say forbidden")
        return super().before_execute(ctx, call)
