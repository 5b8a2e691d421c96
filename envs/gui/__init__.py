"""The GUI setting: MiniWoB++ web tasks in headless Chromium; screenshots, element listings, the task's own reward."""
