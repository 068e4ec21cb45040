"""nbgrader inside a hub container (mounted at /etc/jupyter/nbgrader_config.py): the course, and the exchange root
whose outbound/inbound/feedback are this student's own mounts (docs/hub.md)."""
c = globals()["get_config"]()  # put there by nbgrader's config loader
c.CourseDirectory.course_id = "nmtkit"
c.Exchange.root = "/srv/nbgrader/exchange"
