"""The app's routes, one router per area; each router answers for one permission (``PERMISSION``, one of
``records.permissions``), which ``create_app`` puts in front of all its routes."""
