"""How long-running workflows meet a new build (Worker Versioning, `temporal.versioning`).

A workflow is Pinned to the build that started it (the workflow worker's default): a session, an episode or a
task group ends on the code it began with. Workflows that live on through continue-as-new (training, a canary,
a rollout) would pin the old build forever; each new run of theirs starts on the current build instead, so no
patch has to keep their old histories replaying. Without versioning the option changes nothing.
"""

from temporalio import workflow

UPGRADE_AT_CONTINUE = workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE
