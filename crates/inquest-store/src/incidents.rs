use inquest_core::{IncidentId, IncidentText, Tenant};
use time::OffsetDateTime;

use tokio_postgres::Row;
use uuid::Uuid;

use crate::{Store, StoreError, rows::get, text};

#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    pub id: IncidentId,
    pub title: String,
    pub description: String,
    pub created_at: OffsetDateTime,
    pub source: IncidentSource,
}

/// Where an incident came from (`incidents.source`, migration V37): set
/// once, by the path that inserted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncidentSource {
    /// CreateIncident.
    Manual,
    /// An Alertmanager notification's alert group.
    Alert,
    /// A schedule's tick.
    Schedule,
}

impl IncidentSource {
    pub fn as_str(self) -> &'static str {
        match self {
            IncidentSource::Manual => "manual",
            IncidentSource::Alert => "alert",
            IncidentSource::Schedule => "schedule",
        }
    }

    fn parse(stored: &str) -> Result<Self, StoreError> {
        match stored {
            "manual" => Ok(IncidentSource::Manual),
            "alert" => Ok(IncidentSource::Alert),
            "schedule" => Ok(IncidentSource::Schedule),
            other => Err(StoreError::Corrupt(format!(
                "incident source {other:?} is none of manual, alert, schedule"
            ))),
        }
    }
}

/// One page of incidents, newest first.
#[derive(Debug, Clone)]
pub struct IncidentPage {
    pub incidents: Vec<Incident>,
    /// Pass as `before` to get the next page; `None` on the last page.
    pub next: Option<IncidentId>,
}

fn incident_from_row(row: &Row) -> Result<Incident, StoreError> {
    let escaped: bool = get(row, 4)?;
    Ok(Incident {
        id: IncidentId::from_uuid(get(row, 0)?),
        title: text::read(get(row, 1)?, escaped, "incident title")?,
        description: text::read(get(row, 2)?, escaped, "incident description")?,
        created_at: get(row, 3)?,
        source: IncidentSource::parse(get(row, 5)?)?,
    })
}

impl Store {
    /// Creates an incident of `tenant`.
    pub async fn create_incident(
        &self,
        tenant: &Tenant,
        input: &IncidentText,
    ) -> Result<Incident, StoreError> {
        let (id, created_at) = self
            .run("create_incident", async |c| {
                let id = IncidentId::new();
                let row = insert_row(&***c, id, tenant, input, IncidentSource::Manual).await?;
                Ok((id, get(&row, 0)?))
            })
            .await?;
        Ok(Incident {
            id,
            title: input.title().to_owned(),
            description: input.description().to_owned(),
            created_at,
            source: IncidentSource::Manual,
        })
    }

    /// The incident `id` of `tenant`: another tenant's is NotFound, exactly
    /// as an unknown id.
    pub async fn get_incident(
        &self,
        tenant: &Tenant,
        id: IncidentId,
    ) -> Result<Incident, StoreError> {
        let row = self
            .run("get_incident", async |c| {
                Ok(c.query_opt(
                    "SELECT title, description, created_at, escaped, source FROM incidents \
                     WHERE id = $1 AND tenant = $2",
                    &[id.as_uuid(), &tenant.as_str()],
                )
                .await?)
            })
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "incident",
                id: id.to_string(),
            })?;
        let escaped: bool = get(&row, 3)?;
        Ok(Incident {
            id,
            title: text::read(get(&row, 0)?, escaped, "incident title")?,
            description: text::read(get(&row, 1)?, escaped, "incident description")?,
            created_at: get(&row, 2)?,
            source: IncidentSource::parse(get(&row, 4)?)?,
        })
    }

    /// `tenant`'s incidents newest first (ids are UUIDv7), `limit` at a
    /// time, starting after the incident `before` (exclusive) when given,
    /// only those from `source` when given. One read of
    /// `incidents_by_tenant` (V16), or `incidents_by_tenant_source` (V37)
    /// with a source, at most `limit + 1` rows.
    pub async fn list_incidents(
        &self,
        tenant: &Tenant,
        before: Option<IncidentId>,
        limit: u32,
        source: Option<IncidentSource>,
    ) -> Result<IncidentPage, StoreError> {
        let before = before.map_or(Uuid::max(), |b| *b.as_uuid());
        let fetch = i64::from(limit) + 1;
        let rows = self
            .run("list_incidents", async |c| {
                Ok(match source {
                    None => {
                        c.query(
                            "SELECT id, title, description, created_at, escaped, source \
                             FROM incidents \
                             WHERE tenant = $3 AND id < $1 ORDER BY id DESC LIMIT $2",
                            &[&before, &fetch, &tenant.as_str()],
                        )
                        .await?
                    }
                    Some(source) => {
                        c.query(
                            "SELECT id, title, description, created_at, escaped, source \
                             FROM incidents \
                             WHERE tenant = $3 AND source = $4 AND id < $1 \
                             ORDER BY id DESC LIMIT $2",
                            &[&before, &fetch, &tenant.as_str(), &source.as_str()],
                        )
                        .await?
                    }
                })
            })
            .await?;
        let mut incidents = rows
            .iter()
            .map(incident_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if incidents.len() > limit as usize {
            incidents.truncate(limit as usize);
            incidents.last().map(|i| i.id)
        } else {
            None
        };
        Ok(IncidentPage { incidents, next })
    }
}

/// Inserts an incident of `tenant` in `tx` (an alert group's first
/// notification creates one in its own transaction).
pub(crate) async fn insert_incident(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &Tenant,
    input: &IncidentText,
    source: IncidentSource,
) -> Result<IncidentId, StoreError> {
    let id = IncidentId::new();
    insert_row(&**tx, id, tenant, input, source).await?;
    Ok(id)
}

/// The one INSERT of an incident; returns its `created_at`.
async fn insert_row(
    c: &impl tokio_postgres::GenericClient,
    id: IncidentId,
    tenant: &Tenant,
    input: &IncidentText,
    source: IncidentSource,
) -> Result<Row, StoreError> {
    // Title and description may hold U+0000: stored escaped (crate::text).
    let escaped = text::has_nul(input.title()) || text::has_nul(input.description());
    let title = text::field(input.title(), escaped);
    let description = text::field(input.description(), escaped);
    Ok(c.query_one(
        "INSERT INTO incidents (id, title, description, escaped, tenant, source) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at",
        &[
            id.as_uuid(),
            &&*title,
            &&*description,
            &escaped,
            &tenant.as_str(),
            &source.as_str(),
        ],
    )
    .await?)
}
